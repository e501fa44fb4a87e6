package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
)

// TestGPUSuiteFlow runs the Robertson and neural rows of the GPU suite on
// the CPU engine (their kernel times are then zero): the protocol, the
// reference, the table and the dump.
func TestGPUSuiteFlow(t *testing.T) {
	var out bytes.Buffer
	rows, err := RunGPURobertson(&out, GPUConfig{N: []int{16}, RelTol: []float64{1e-5}, Reps: 1, RefSample: 2, Engine: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Steps <= 0 || !(rows[0].Err < 1e-3) || rows[0].GradRecordCall <= 0 {
		t.Errorf("Robertson row %+v", rows)
	}
	var dump bytes.Buffer
	rows, err = RunGPUNeural(&out, GPUConfig{N: []int{8, 32}, Reps: 1, RefSample: 4, Engine: "cpu", JSON: true, Dump: &dump})
	if err != nil {
		t.Fatal(err)
	}
	var d NeuralDump
	if err := json.Unmarshal(dump.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(d.Results) != 2 || len(d.Y0) != 64 || len(d.Results[1].Grad) != len(d.Weights) || d.Results[1].Loss != rows[1].Loss {
		t.Errorf("neural rows %+v, dump of %d results, %d y0", rows, len(d.Results), len(d.Y0))
	}
	if !strings.Contains(out.String(), "robertson") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestGPUSuiteNoGPU: without a GPU the Lorenz rows (which need the
// hand-written kernels) report ErrNoCUDA.
func TestGPUSuiteNoGPU(t *testing.T) {
	if n, err := driver.DeviceCount(); err == nil && n > 0 {
		t.Skip("a GPU is present")
	}
	_, err := RunGPU(&bytes.Buffer{}, GPUConfig{N: []int{4}, RelTol: []float64{1e-4}, Reps: 1, RefSample: 2, Engine: "cpu"})
	if !errors.Is(err, ErrNoCUDA) {
		t.Errorf("RunGPU without a GPU: %v, want ErrNoCUDA", err)
	}
}
