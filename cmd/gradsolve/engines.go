package main

// The CLI's engines: the CPU engine (package ode) and, imported here for
// its registration, the GPU engines "cuda", "cuda-f32" and "cuda-multi".
// They load the CUDA driver only when asked for (-engine cuda, or "auto"
// asking whether a GPU is there), so the binary runs on machines without
// one.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda"
	"github.com/gradsolve-go/gradsolve/ode"
)

// finishCompiles waits, before the process ends, for the GPU kernels
// still compiling in the background (a first call ran on the CPU engine
// meanwhile: cuda's package doc, "First calls"), so that they reach the
// disk cache and the next run finds them; where it waits it says so on
// stderr. An interrupt ends the wait (handleSignals).
func finishCompiles(stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	err := cuda.WaitForCompiles(ctx)
	cancel()
	if err == nil {
		return
	}
	fmt.Fprintln(stderr, "gradsolve: finishing the GPU kernels' compile for the next runs (the disk cache); interrupt to skip")
	_ = cuda.WaitForCompiles(context.Background())
}

// errorText is the text of a failed run's error as the command reports it
// (stderr, the report's status, JSON's status and error): the library's
// advice in flags (cliHints) and, where the engine asked for cannot run
// here (ode.ErrUnavailable: no GPU, no driver or NVRTC), how to run the
// same command on the CPU.
func errorText(err error) string {
	s := cliHints.Replace(err.Error())
	if errors.Is(err, ode.ErrUnavailable) || errors.Is(err, cuda.ErrNoGPU) || errors.Is(err, cuda.ErrNoNVRTC) {
		s += "; to run on the CPU, leave out -engine (or give -engine cpu), or use -engine auto, which takes a GPU engine where one is available and the CPU elsewhere"
	}
	return s
}
