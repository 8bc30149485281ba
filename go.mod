module github.com/podtrace/podtrace

go 1.26.0
