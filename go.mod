module github.com/gradsolve-go/gradsolve

go 1.25.0

require (
	github.com/ebitengine/purego v0.11.3
	gonum.org/v1/gonum v0.17.0
)
