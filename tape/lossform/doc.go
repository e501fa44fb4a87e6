// Package lossform finds the forms of a loss's gradient program over its
// save times that let an engine compute the loss where it writes or reads
// each save time's state, instead of over an array of every saved value
// (issue 25).
//
// A loss's gradient program (ode's LossPlan.Grad) has inputs y[D] (the
// final state), ys[K·D] (the saved states, save time k at k·D), data[DD],
// p[P] (per trajectory) and the shared parameters (marked Shared), and
// outputs ℓ, ∂ℓ/∂y [D], ∂ℓ/∂ys [K·D], ∂ℓ/∂p [P] and ∂ℓ/∂s, one per shared
// parameter. Shape gives those sizes.
//
// Two forms, found by matching the program's values, never by running it:
//
//   - SplitSaveCots: each save time's cotangents ∂ℓ/∂ys[k,·] are one
//     function of save time k's state (with the final state, data entries
//     that move with k, parameters), the same at every k (SaveCots).
//   - SplitFold: ℓ is a left fold over the save times, acc_0 = first(save
//     time 0), acc_k = next(acc_{k-1}, save time k), ℓ = end(acc_{K-1})
//     (Fold).
//
// Every function either returns is made of the gradient program's own
// values, the same op on the same operands in the same order, so an
// engine that evaluates it gets the program's results bit for bit. The
// GPU kernels (cuda/internal/kernelgen) emit these functions as C; the
// CPU engine (ode) evaluates them in its record and sweep.
package lossform
