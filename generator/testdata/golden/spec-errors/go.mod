module example.com/spec-errors

