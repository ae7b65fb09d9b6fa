module example.com/singleton

go 1.24
