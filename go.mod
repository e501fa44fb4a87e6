module github.com/gradsolve-go/gradsolve

go 1.25.0

require (
	github.com/janpfeifer/gonb v0.11.4
	github.com/schollz/progressbar/v3 v3.19.1
	golang.org/x/term v0.44.0
	gonum.org/v1/gonum v0.17.0
)

require (
	github.com/go-logr/logr v1.4.2 // indirect
	github.com/gofrs/uuid v4.4.0+incompatible // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/exp v0.0.0-20250106191152-7588d65b2ba8 // indirect
	golang.org/x/sys v0.46.0 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
)
