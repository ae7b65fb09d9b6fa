module example.com/jobsonly

go 1.24
