// Package nn builds small neural networks out of traced operations, so
// that a network can sit inside an ODE right-hand side (package ode) and
// be differentiated, compiled for the GPU and run on the CPU like any
// other traced code (package tape).
//
// A layer is a value that describes its shape and emits tape ops when
// applied; it holds no weights. Weights live in a flat parameter vector
// whose layout each type documents, usually the shared parameters of an
// ode.Field:
//
//	mlp := nn.NewMLP([]int{2, 16, 16, 1}, nn.Tanh, nn.Softplus)
//	w := mlp.Init(nil, rand.New(rand.NewPCG(1, 1))) // len mlp.NumParams()
//	...
//	F: func(t tape.V, y, p []tape.V) []tape.V {
//		out := mlp.Apply(p[nPerTraj:], y[:2]) // traced forward pass
//		...
//	}
//
// # Conventions
//
// A Dense layer's parameters are its Out×In weight matrix W, row-major
// (W[i][j] = w[i*In+j]), followed by its Out biases. An MLP's parameters
// are its layers' parameters, first layer first. Slices a function writes
// are named dst; a nil dst is allocated. Shape errors (a parameter vector
// of the wrong length, layers that do not chain) are programming errors
// and panic with a message prefixed "nn: "; inside tape.Trace or
// ode.Field.Program such a panic is returned as an error.
//
// # Parameter sets and weight files
//
// A Set names the blocks of a flat parameter vector and gives their
// shapes: MLP.Params returns "layer0.W" [Out, In], "layer0.b" [Out],
// "layer1.W", … in the layout above, and Set.View returns a block as a
// sub-slice of the flat vector, so an optimiser (package optim) updates
// the flat vector while people, files and regularisers see named arrays.
// Save and Load write and read a flat vector as JSON records of name,
// shape and data, exactly (bit for bit).
//
// Initialisers take an explicit *rand.Rand (math/rand/v2), so results are
// reproducible from a seed.
package nn
