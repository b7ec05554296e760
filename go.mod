module github.com/ctibridge/ctibridge

go 1.26
