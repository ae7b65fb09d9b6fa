module example.com/jobs-not-generated
