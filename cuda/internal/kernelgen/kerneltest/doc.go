// Package kerneltest holds what the tests of kernel generation share
// between package kernelgen (the host C++ and warp simulation tests) and
// package cuda (the NVRTC and GPU tests): test programs with their inputs
// and tolerances (AllPrograms), their comparison with tape's evaluation
// (Program.Compare), and the host compiler's helpers (GXX, CompileHost,
// WarpSim).
package kerneltest
