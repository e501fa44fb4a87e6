// Package scan runs a one-step map over a fixed mesh of step sizes, for an
// ensemble of trajectories, and differentiates the result exactly.
//
// A Step is a traced program y⁺ = Φ(t, h, y, p, s) (package tape); a Mesh
// gives every trajectory its own step sizes, step-major (step k of
// trajectory j at H[k*N+j]) and its own length. Replay runs the map;
// Forward runs it keeping checkpoints and Sweep.Backward runs the reverse
// sweep with the step's vector–Jacobian program, returning gradients with
// respect to the initial states, the per-trajectory parameters and the
// shared parameters (summed over trajectories). The gradient is the exact
// adjoint of the computed replay: the mesh is data, not differentiated.
//
// Conventions: ensemble arrays are structure-of-arrays, component c of
// trajectory j at x[c*N+j]. Trajectories are processed sorted by length,
// so those still running at step k form a prefix and a short trajectory
// costs only its own steps: a ragged mesh does no padded work.
//
// Saves read every trajectory's states at save times shared by the
// ensemble from the continuous extension of the steps that bracket them
// (Step.Ext): no extra step, one cursor per trajectory, and the
// interpolant's VJP in the backward sweep. Taps evaluate the map from a
// mesh state with another step size; ODE solvers use them to re-step to
// save times (bracket and re-step).
//
// Memory: Forward stores the state every K steps (Settings.Checkpoint);
// with K = 1 (the default when it fits in Settings.MemoryLimit) the
// backward sweep costs one VJP per step; with K > 1 it also recomputes
// K−1 steps of each segment.
package scan
