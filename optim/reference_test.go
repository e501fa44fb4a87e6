package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The optimisers against their published definitions, written here again
// without the package's code (no Rule, no rate, no defaults): over 2,000
// steps of random gradients of scales from 1e-8 to 1e4 (and exact zeros),
// with random hyperparameters and schedules, each step of Step agrees with
// the reference's step from the same state to 1e-12 relative, term by
// term. The reference is resynchronised to the optimiser's state before
// each step, so the bound is per step, not the drift of two
// trajectories.
//
//   - Adam: Kingma & Ba 2015, Algorithm 1, with ε added to √v̂ (as optax's
//     scale_by_adam with eps_root = 0): m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ),
//     β^t by repeated multiplication.
//   - AdamW: optax.adamw's chain, scale_by_adam then
//     add_decayed_weights(λ) then scale_by_learning_rate:
//     θ ← θ − lr·(m̂/(√v̂+ε) + λ·θ) (Loshchilov & Hutter's decoupled decay,
//     with the learning rate multiplying it, as PyTorch and optax).
//   - SGD: optax.sgd's trace, f ← g + μ·f, update f or, Nesterov, g + μ·f.
//   - Schedules: optax.exponential_decay, init·rate^(count/transition_steps)
//     (floor with staircase), and warmup_cosine_decay_schedule,
//     polynomial_schedule's (init − peak)·(1 − k/W) + peak, then
//     peak·((1−α)·½(1+cos(π·k'/D)) + α) with α = end/peak.
//   - Clipping: optax.clip_by_global_norm, t/‖t‖·max where ‖t‖ ≥ max.
func TestAgainstReference(t *testing.T) {
	t.Parallel()
	const n, steps = 9, 2000
	for _, tc := range []struct {
		name string
		kind string // adam, adamw, sgd
		lr   float64
		b1   float64
		b2   float64
		eps  float64
		wd   float64
		mu   float64
		nest bool
		clip float64
		sch  Schedule
	}{
		{name: "adam", kind: "adam", lr: 1e-3, b1: 0.9, b2: 0.999, eps: 1e-8},
		{name: "adam-odd-betas", kind: "adam", lr: 0.3, b1: 0.5, b2: 0.9, eps: 1e-3},
		{name: "adam-clip", kind: "adam", lr: 0.01, b1: 0.95, b2: 0.9999, eps: 1e-12, clip: 0.7},
		{name: "adam-warmup-cosine", kind: "adam", b1: 0.9, b2: 0.999, eps: 1e-8,
			sch: WarmupCosine{Init: 1e-4, Peak: 0.05, Final: 1e-3, Warmup: 100, Steps: 1500}},
		{name: "adamw", kind: "adamw", lr: 0.01, b1: 0.9, b2: 0.999, eps: 1e-8, wd: 0.01},
		{name: "adamw-heavy-decay-exp", kind: "adamw", b1: 0.8, b2: 0.99, eps: 1e-6, wd: 0.3,
			sch: Exponential{Init: 0.1, Decay: 0.5, Every: 300}},
		{name: "sgd", kind: "sgd", lr: 0.02},
		{name: "sgd-momentum-clip", kind: "sgd", lr: 0.01, mu: 0.9, clip: 2},
		{name: "sgd-nesterov-staircase", kind: "sgd", mu: 0.6, nest: true,
			sch: Exponential{Init: 0.05, Decay: 0.7, Every: 250, Staircase: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(23, uint64(len(tc.name))))
			var opt Optimizer
			switch tc.kind {
			case "adam":
				opt = &Adam{LearnRate: tc.lr, Schedule: tc.sch, Beta1: tc.b1, Beta2: tc.b2, Eps: tc.eps}
			case "adamw":
				opt = &AdamW{LearnRate: tc.lr, Schedule: tc.sch, Beta1: tc.b1, Beta2: tc.b2, Eps: tc.eps, WeightDecay: tc.wd}
			default:
				opt = &SGD{LearnRate: tc.lr, Schedule: tc.sch, Momentum: tc.mu, Nesterov: tc.nest}
			}
			x := make([]float64, n)
			for i := range x {
				x[i] = 4*rng.Float64() - 2
			}
			m, v, b := make([]float64, n), make([]float64, n), make([]float64, n)
			p1, p2 := 1.0, 1.0 // β1ᵗ, β2ᵗ
			for k := range steps {
				g := make([]float64, n)
				for i := range g {
					if rng.IntN(17) != 0 {
						g[i] = rng.NormFloat64() * math.Pow(10, -8+12*rng.Float64())
					}
				}
				lr := tc.lr
				if tc.sch != nil {
					lr = refRate(tc.sch, k)
					if r := tc.sch.Rate(k); !near(r, lr, 1e-12*lr) {
						t.Fatalf("step %d: the schedule's rate %v, the reference's %v", k, r, lr)
					}
				}
				if tc.clip > 0 {
					want := refClip(g, tc.clip)
					ClipNorm(g, tc.clip)
					for i := range g {
						if !near(g[i], want[i], 1e-12*math.Abs(want[i])) {
							t.Fatalf("step %d: clipped g[%d] = %v, the reference %v", k, i, g[i], want[i])
						}
					}
				}
				// The reference's step from the optimiser's state.
				s := opt.State()
				if k > 0 {
					copy(m, s.Moments["m"])
					copy(v, s.Moments["v"])
					copy(b, s.Moments["b"])
				}
				p1 *= tc.b1
				p2 *= tc.b2
				wx, wm, wv, wb, tol := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
				for i := range x {
					switch tc.kind {
					case "adam", "adamw":
						wm[i] = tc.b1*m[i] + (1-tc.b1)*g[i]
						wv[i] = tc.b2*v[i] + (1-tc.b2)*g[i]*g[i]
						mh, vh := wm[i]/(1-p1), wv[i]/(1-p2)
						u := mh/(math.Sqrt(vh)+tc.eps) + tc.wd*x[i]
						wx[i] = x[i] - lr*u
						tol[i] = math.Abs(x[i]) + lr*(math.Abs(mh/(math.Sqrt(vh)+tc.eps))+tc.wd*math.Abs(x[i]))
					default:
						wb[i] = g[i] + tc.mu*b[i]
						u := wb[i]
						if tc.nest {
							u = g[i] + tc.mu*wb[i]
						}
						wx[i] = x[i] - lr*u
						tol[i] = math.Abs(x[i]) + lr*(math.Abs(g[i])+2*tc.mu*math.Abs(wb[i])+tc.mu*tc.mu*math.Abs(b[i]))
					}
				}
				opt.Step(x, g)
				if err := opt.Err(); err != nil {
					t.Fatalf("step %d: %v", k, err)
				}
				s = opt.State()
				for i := range x {
					if !near(x[i], wx[i], 1e-12*tol[i]) {
						t.Fatalf("step %d: x[%d] = %.17g, the reference %.17g", k, i, x[i], wx[i])
					}
					switch tc.kind {
					case "adam", "adamw":
						gm := tc.b1*math.Abs(m[i]) + (1-tc.b1)*math.Abs(g[i])
						if !near(s.Moments["m"][i], wm[i], 1e-12*gm) || !near(s.Moments["v"][i], wv[i], 1e-12*wv[i]) {
							t.Fatalf("step %d: moments (%v, %v), the reference (%v, %v)", k, s.Moments["m"][i], s.Moments["v"][i], wm[i], wv[i])
						}
					default:
						if tc.mu != 0 && !near(s.Moments["b"][i], wb[i], 1e-12*(math.Abs(g[i])+tc.mu*math.Abs(b[i]))) {
							t.Fatalf("step %d: moment b = %v, the reference %v", k, s.Moments["b"][i], wb[i])
						}
					}
				}
				copy(x, wx) // both go on from the reference's values
			}
			if opt.Steps() != steps {
				t.Errorf("Steps() = %d, want %d", opt.Steps(), steps)
			}
		})
	}
}

// near reports whether |a − b| ≤ tol (exact equality for tol 0).
func near(a, b, tol float64) bool { return a == b || math.Abs(a-b) <= tol }

// refRate is the rate of step k of the schedules under test, as optax
// defines them.
func refRate(s Schedule, k int) float64 {
	switch s := s.(type) {
	case Exponential:
		p := float64(k) / float64(max(s.Every, 1))
		if s.Staircase {
			p = math.Floor(p)
		}
		return s.Init * math.Pow(s.Decay, p)
	case WarmupCosine:
		if k < s.Warmup {
			frac := 1 - float64(k)/float64(s.Warmup)
			return (s.Init-s.Peak)*frac + s.Peak
		}
		d := float64(s.Steps - s.Warmup)
		c := math.Min(float64(k-s.Warmup), d)
		alpha := s.Final / s.Peak
		return s.Peak * ((1-alpha)*0.5*(1+math.Cos(math.Pi*c/d)) + alpha)
	}
	panic(fmt.Sprintf("refRate: schedule %T", s))
}

// refClip is optax.clip_by_global_norm of g (a copy): the norm as
// √(Σ t²), t/‖t‖·max where ‖t‖ ≥ max.
func refClip(g []float64, maxNorm float64) []float64 {
	s := 0.0
	for _, v := range g {
		s += v * v
	}
	norm := math.Sqrt(s)
	out := append([]float64(nil), g...)
	if norm < maxNorm {
		return out
	}
	for i := range out {
		out[i] = out[i] / norm * maxNorm
	}
	return out
}
