module example.com/spec-error

