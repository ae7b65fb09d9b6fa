module example.com/every

go 1.24

