package cuda

import "github.com/gradsolve-go/gradsolve/cuda/driver"

// ErrNoGPU and ErrNoNVRTC are package driver's: an engine's Available
// error wraps one of them where there is no device or no NVRTC.
var (
	ErrNoGPU   = driver.ErrNoGPU
	ErrNoNVRTC = driver.ErrNoNVRTC
)
