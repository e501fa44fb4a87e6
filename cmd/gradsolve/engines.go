package main

// The CLI's engines: the CPU engine (package ode) and, imported here for
// its registration, the GPU engines "cuda", "cuda-f32" and "cuda-multi".
// They load the CUDA driver only when asked for (-engine cuda, or "auto"
// asking whether a GPU is there), so the binary runs on machines without
// one.
import _ "github.com/gradsolve-go/gradsolve/cuda"
