package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Activation is an elementwise activation function applied after a
// layer's affine map.
type Activation uint8

const (
	Identity Activation = iota // x
	Tanh                       // tanh(x)
	Relu                       // max(x, 0), derivative 0 at 0
	Sigmoid                    // 1/(1+e⁻ˣ)
	Softplus                   // log(1+eˣ), a smooth positive output

	numActivations
)

var activationNames = [numActivations]string{
	Identity: "identity",
	Tanh:     "tanh",
	Relu:     "relu",
	Sigmoid:  "sigmoid",
	Softplus: "softplus",
}

// String returns the activation's lower-case name, as "tanh", or
// "Activation(n)" for an unknown value.
func (a Activation) String() string {
	if a < numActivations {
		return activationNames[a]
	}
	return "Activation(" + strconv.Itoa(int(a)) + ")"
}

// Apply returns a(x) as a traced value. It panics for an unknown
// activation.
func (a Activation) Apply(x tape.V) tape.V {
	switch a {
	case Identity:
		return x
	case Tanh:
		return x.Tanh()
	case Relu:
		return x.Relu()
	case Sigmoid:
		return x.Sigmoid()
	case Softplus:
		return x.Softplus()
	}
	panic(fmt.Sprintf("nn: unknown activation %v", a))
}

// Dense is a fully connected layer y = Act(W x + b) with In inputs and Out
// outputs. Its NumParams() = Out*In + Out parameters are W, an Out×In
// matrix stored row-major (W[i][j] = w[i*In+j]), followed by b (len Out).
type Dense struct {
	In, Out int
	Act     Activation
}

// NumParams returns the number of parameters of the layer, Out*In + Out.
func (l Dense) NumParams() int { return l.Out*l.In + l.Out }

// Apply returns Act(W x + b) (len Out) as traced values, with W and b read
// from w (len NumParams(), layout as documented on Dense) and x of len
// In. It panics if In or Out is less than 1, or if len(w) or len(x) is
// wrong.
func (l Dense) Apply(w, x []tape.V) []tape.V {
	if l.In < 1 || l.Out < 1 {
		panic(fmt.Sprintf("nn: Dense{In: %d, Out: %d}: sizes must be at least 1", l.In, l.Out))
	}
	if len(x) != l.In {
		panic(fmt.Sprintf("nn: Dense{In: %d, Out: %d}.Apply: len(x) = %d, want In = %d", l.In, l.Out, len(x), l.In))
	}
	if len(w) != l.NumParams() {
		panic(fmt.Sprintf("nn: Dense{In: %d, Out: %d}.Apply: len(w) = %d, want NumParams() = %d", l.In, l.Out, len(w), l.NumParams()))
	}
	nw := l.Out * l.In
	y := tape.Dense(w[:nw], x, w[nw:])
	if l.Act != Identity {
		for i := range y {
			y[i] = l.Act.Apply(y[i])
		}
	}
	return y
}

// MLP is a multilayer perceptron: its layers applied in order, each
// layer's Out equal to the next one's In. Its parameters are the layers'
// parameters concatenated, first layer first, each laid out as documented
// on Dense.
type MLP []Dense

// NewMLP returns the MLP with layer sizes sizes[0] → sizes[1] → … →
// sizes[len-1]: len(sizes)-1 Dense layers, every layer but the last with
// activation hidden, the last with activation out. For example
// NewMLP([]int{2, 16, 16, 1}, Tanh, Softplus) has two tanh hidden layers
// of width 16 and one softplus output, 337 parameters. It panics if
// len(sizes) < 2 or a size is less than 1.
func NewMLP(sizes []int, hidden, out Activation) MLP {
	if len(sizes) < 2 {
		panic(fmt.Sprintf("nn: NewMLP: %d sizes; need at least 2 (inputs and outputs)", len(sizes)))
	}
	m := make(MLP, len(sizes)-1)
	for k := range m {
		if sizes[k] < 1 || sizes[k+1] < 1 {
			panic(fmt.Sprintf("nn: NewMLP: sizes %v: every size must be at least 1", sizes))
		}
		act := hidden
		if k == len(m)-1 {
			act = out
		}
		m[k] = Dense{In: sizes[k], Out: sizes[k+1], Act: act}
	}
	return m
}

// In returns the number of inputs of the MLP (0 if it has no layers).
func (m MLP) In() int {
	if len(m) == 0 {
		return 0
	}
	return m[0].In
}

// Out returns the number of outputs of the MLP (0 if it has no layers).
func (m MLP) Out() int {
	if len(m) == 0 {
		return 0
	}
	return m[len(m)-1].Out
}

// NumParams returns the total number of parameters of the layers.
func (m MLP) NumParams() int {
	n := 0
	for _, l := range m {
		n += l.NumParams()
	}
	return n
}

// check panics if m has no layers, a layer has a size less than 1 or
// its layers do not chain.
func (m MLP) check(fn string) {
	if len(m) == 0 {
		panic("nn: MLP." + fn + ": the MLP has no layers")
	}
	for k, l := range m {
		if l.In < 1 || l.Out < 1 {
			panic(fmt.Sprintf("nn: MLP.%s: layer %d is Dense{In: %d, Out: %d}: sizes must be at least 1", fn, k, l.In, l.Out))
		}
	}
	for k := 1; k < len(m); k++ {
		if m[k].In != m[k-1].Out {
			panic(fmt.Sprintf("nn: MLP.%s: layer %d has %d outputs but layer %d has %d inputs", fn, k-1, m[k-1].Out, k, m[k].In))
		}
	}
}

// Apply returns the MLP's outputs (len Out()) for inputs x (len In()) as
// traced values, with the parameters read from w (len NumParams(), layout
// as documented on MLP). It panics if the MLP has no layers, its layers
// do not chain, or len(w) or len(x) is wrong.
func (m MLP) Apply(w, x []tape.V) []tape.V {
	m.check("Apply")
	if len(w) != m.NumParams() {
		panic(fmt.Sprintf("nn: MLP.Apply: len(w) = %d, want NumParams() = %d", len(w), m.NumParams()))
	}
	if len(x) != m.In() {
		panic(fmt.Sprintf("nn: MLP.Apply: len(x) = %d, want In() = %d", len(x), m.In()))
	}
	off := 0
	for _, l := range m {
		n := l.NumParams()
		x = l.Apply(w[off:off+n], x)
		off += n
	}
	return x
}

// Init fills dst (len NumParams(); nil allocates) with initial parameters
// and returns it: Glorot (Xavier) uniform weights, W[i][j] drawn from
// U(−a, a) with a = √(6/(In+Out)) for each layer, and zero biases
// (Glorot & Bengio, AISTATS 2010). Draws come from rng in layout order, so
// a seeded rng gives reproducible parameters. It panics if rng is nil,
// a layer's size is less than 1, the MLP's layers do not chain, or
// len(dst) is wrong.
func (m MLP) Init(dst []float64, rng *rand.Rand) []float64 {
	m.check("Init")
	if rng == nil {
		panic("nn: MLP.Init: nil *rand.Rand")
	}
	n := m.NumParams()
	if dst == nil {
		dst = make([]float64, n)
	}
	if len(dst) != n {
		panic(fmt.Sprintf("nn: MLP.Init: len(dst) = %d, want NumParams() = %d", len(dst), n))
	}
	off := 0
	for _, l := range m {
		a := math.Sqrt(6 / float64(l.In+l.Out))
		nw := l.Out * l.In
		for i := range dst[off : off+nw] {
			dst[off+i] = a * (2*rng.Float64() - 1)
		}
		clear(dst[off+nw : off+nw+l.Out])
		off += nw + l.Out
	}
	return dst
}
