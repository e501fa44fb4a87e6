package optim

import (
	"fmt"
	"math"
)

// Schedule gives the learning rate of each optimiser step. Rate(k) is the
// rate of the step taken after k steps (k = 0 for the first step). The
// schedules here are values with no state, so one can serve several
// optimisers.
type Schedule interface {
	Rate(k int) float64
}

var (
	_ Schedule = Constant(0)
	_ Schedule = Exponential{}
	_ Schedule = WarmupCosine{}
)

// Constant is a constant learning rate.
type Constant float64

// Rate returns c for every step.
func (c Constant) Rate(int) float64 { return float64(c) }

// Exponential decays the rate geometrically: Rate(k) = Init·Decay^(k/Every)
// (optax.exponential_decay), with k/Every an integer division if Staircase
// is set and a real one otherwise.
type Exponential struct {
	Init  float64 // the rate of step 0
	Decay float64 // the factor per Every steps, in (0, 1] to decay
	// Every is the number of steps over which the rate is multiplied by
	// Decay; 0 means 1.
	Every     int
	Staircase bool
}

// Validate returns an error if Init is negative or not finite, Decay is
// not positive and finite, or Every is negative.
func (e Exponential) Validate() error {
	if !finiteNonNeg(e.Init) || !(e.Decay > 0) || math.IsInf(e.Decay, 1) || e.Every < 0 {
		return fmt.Errorf("optim: Exponential: Init = %v (want finite, ≥ 0), Decay = %v (want finite, > 0), Every = %d (want ≥ 0)", e.Init, e.Decay, e.Every)
	}
	return nil
}

// Rate returns Init·Decay^(k/Every).
func (e Exponential) Rate(k int) float64 {
	every := e.Every
	if every <= 0 {
		every = 1
	}
	x := float64(k) / float64(every)
	if e.Staircase {
		x = float64(k / every)
	}
	return e.Init * math.Pow(e.Decay, x)
}

// WarmupCosine rises linearly from Init to Peak over the first Warmup
// steps, then follows a half cosine from Peak down to Final at step
// Steps, and stays at Final after (optax.warmup_cosine_decay_schedule):
//
//	k < Warmup:           Init + (Peak − Init)·k/Warmup
//	Warmup ≤ k < Steps:   Final + (Peak − Final)·(1 + cos(π·(k−Warmup)/(Steps−Warmup)))/2
//	k ≥ Steps:            Final
//
// Its rates are NaN if Warmup < 0 or Steps < Warmup (Validate says why);
// the optimisers refuse NaN rates.
type WarmupCosine struct {
	Init, Peak, Final float64
	Warmup, Steps     int
}

// Validate returns an error if Warmup < 0, Steps < Warmup, a rate
// constant is negative or not finite, or Steps is 0 while Init or Peak
// differs from Final (the rate would be Final from the first step on,
// Peak never reached: Steps left out).
func (w WarmupCosine) Validate() error {
	if w.Warmup < 0 || w.Steps < w.Warmup {
		return fmt.Errorf("optim: WarmupCosine: Warmup = %d, Steps = %d; need 0 ≤ Warmup ≤ Steps", w.Warmup, w.Steps)
	}
	if !finiteNonNeg(w.Init) || !finiteNonNeg(w.Peak) || !finiteNonNeg(w.Final) {
		return fmt.Errorf("optim: WarmupCosine: Init = %v, Peak = %v, Final = %v; need finite rates ≥ 0", w.Init, w.Peak, w.Final)
	}
	if w.Steps == 0 && (w.Peak != w.Final || w.Init != w.Final) {
		return fmt.Errorf("optim: WarmupCosine: Steps = 0, so the rate is Final = %v from the first step on and Peak = %v is never reached; set Steps to the step at which the decay ends (a fit's Steps)", w.Final, w.Peak)
	}
	return nil
}

// Rate returns the rate of step k (NaN if Warmup < 0 or Steps < Warmup).
func (w WarmupCosine) Rate(k int) float64 {
	if w.Warmup < 0 || w.Steps < w.Warmup {
		return math.NaN()
	}
	switch {
	case k < w.Warmup:
		return w.Init + (w.Peak-w.Init)*float64(k)/float64(w.Warmup)
	case k >= w.Steps:
		return w.Final
	}
	x := float64(k-w.Warmup) / float64(w.Steps-w.Warmup)
	// The conversion rounds the product before the sum on every host (Go
	// fuses it on arm64).
	return w.Final + float64((w.Peak-w.Final)*(1+math.Cos(math.Pi*x))/2)
}
