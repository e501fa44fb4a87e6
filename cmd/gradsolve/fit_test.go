package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

func TestFitSynthetic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plot := filepath.Join(dir, "loss.png")
	var out, errb bytes.Buffer
	code := run([]string{"fit", "-problem", "lorenz", "-fit", "rho", "-n", "4", "-vary", "y00=1:4", "-start", "26", "-steps", "150", "-lr", "0.1", "-plot", plot, "-json", "-quiet"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Fitted    [][]float64 `json:"fitted"`
		LossFirst float64     `json:"loss_first"`
		LossFinal float64     `json:"loss_final"`
		Status    string      `json:"status"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	// Exact synthetic data: rho is recovered closely.
	if len(got.Fitted) != 1 || math.Abs(got.Fitted[0][0]-28) > 0.01 {
		t.Errorf("fitted %v, want rho = 28", got.Fitted)
	}
	if !(got.LossFinal < got.LossFirst/100) || got.Status != "max steps" {
		t.Errorf("loss %g -> %g, status %q", got.LossFirst, got.LossFinal, got.Status)
	}
	if st, err := os.Stat(plot); err != nil || st.Size() < 1000 {
		t.Errorf("loss plot: %v", err)
	}
}

// TestFitCSV writes observations of a Van der Pol ensemble (mu = 2) as
// CSV, with some cells missing, and fits mu from 1.5.
func TestFitCSV(t *testing.T) {
	t.Parallel()
	vdp := problems.VanDerPol()
	ts := []float64{0.25, 0.5, 0.75, 1}
	sol, err := ode.Solve(ode.Problem{Field: vdp.Field, Y0: []float64{2, 0, 1, 1}, P: []float64{2}, T1: 1, SaveAt: ts}, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	var csv strings.Builder
	csv.WriteString("traj,t,x,v\n")
	for i := range 2 {
		for k, tau := range ts {
			row := sol.Ys[(i*4+k)*2:]
			if i == 1 && k == 2 {
				fmt.Fprintf(&csv, "%d,%v,%v,\n", i, tau, row[0]) // v missing
				continue
			}
			fmt.Fprintf(&csv, "%d,%v,%v,%v\n", i, tau, row[0], row[1])
		}
	}
	path := filepath.Join(t.TempDir(), "obs.csv")
	if err := os.WriteFile(path, []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"fit", "-problem", "vdp", "-fit", "mu", "-data", path, "-y0", "2,0,1,1", "-p", "1.5", "-steps", "200", "-rtol", "1e-10", "-atol", "1e-12", "-quiet"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "2 trajectories") {
		t.Errorf("output:\n%s", out.String())
	}
	var mu float64
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "0 ") {
			fmt.Sscan(strings.TrimSpace(line[1:]), &mu)
		}
	}
	if math.Abs(mu-2) > 1e-3 {
		t.Errorf("mu = %v, want 2:\n%s", mu, out.String())
	}
}

func TestFitUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"fit"},
		{"fit", "-fit", "nope"},
		{"fit", "-fit", "p7"},
		{"fit", "-fit", "rho,p1"},
		{"fit", "-fit", "rho", "-start", "1,2"},
		{"fit", "-fit", "rho", "-n", "3", "-fits", "2"},
		{"fit", "-fit", "rho", "-data", "/nonexistent.csv"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"help", "fit"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "traj,t,y0,y1") {
		t.Errorf("help fit: exit %d:\n%s", code, out.String())
	}
}
