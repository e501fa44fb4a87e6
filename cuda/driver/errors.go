package driver

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoGPU reports that no usable GPU is present: the driver library
// (libcuda.so.1) is missing, the driver is older than MinDriverVersion, or
// it reports no device. Errors that wrap it say which; test for it with
// errors.Is. An engine choosing "auto" runs on the CPU when it sees it.
var ErrNoGPU = errors.New("no GPU")

// ErrNoNVRTC reports that the NVRTC library (libnvrtc.so.13, .12, ...)
// was not found; errors that wrap it list where it was looked for.
var ErrNoNVRTC = errors.New("no NVRTC")

// ErrClosed is returned by a Device, and by the buffers, modules and
// streams it made, once the Device is closed.
var ErrClosed = errors.New("cuda: device is closed")

// Error is a failed CUDA driver call: the entry point, the CUresult code,
// its name and its description, as in
//
//	cuda: cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): invalid argument
type Error struct {
	Call string // the driver entry point, as "cuLaunchKernel"
	Code int    // the CUresult
	Name string // the code's name, as "CUDA_ERROR_INVALID_VALUE"
	Desc string // the driver's description of the code
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Desc != "" {
		s += ": " + e.Desc
	}
	return s
}

// Is reports CUDA_ERROR_NO_DEVICE (100) as ErrNoGPU.
func (e *Error) Is(target error) bool {
	return target == ErrNoGPU && e.Code == errNoDevice
}

// CompileError is a failed NVRTC compilation. Log is NVRTC's compile log,
// whose lines point into the source (file Program, line numbers of the
// source given to Compile).
type CompileError struct {
	Program string   // the program name given to NVRTC
	Options []string // the options it was compiled with
	Code    int      // the nvrtcResult
	Msg     string   // NVRTC's name for the result, as "NVRTC_ERROR_COMPILATION"
	Log     string
}

func (e *CompileError) Error() string {
	s := fmt.Sprintf("cuda: NVRTC compiling %s (%s): %s (%d)", e.Program, strings.Join(e.Options, " "), e.Msg, e.Code)
	if log := strings.TrimSpace(e.Log); log != "" {
		s += "\n" + log
	}
	return s
}
