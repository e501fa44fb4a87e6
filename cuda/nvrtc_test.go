package cuda

import (
	"bytes"
	"errors"
	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"slices"
	"strings"
	"testing"
)

// These tests need NVRTC but no GPU; they skip where it is not found.

func needNVRTC(t *testing.T) {
	t.Helper()
	major, minor, path, err := driver.NVRTCVersion()
	if errors.Is(err, ErrNoNVRTC) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NVRTC %d.%d from %s", major, minor, path)
}

// testArch is an architecture every NVRTC from 11.2 to 13 compiles for.
var testArch = driver.Arch{Major: 8, Minor: 0}

// compilePTX compiles src (named name in errors) with l to PTX for
// testArch, as the engine does (no fused multiply-adds), and returns it;
// a warning in NVRTC's log fails the test.
func compilePTX(t *testing.T, src, name string) string {
	t.Helper()
	img, err := driver.CompilePTX(src, name+".cu", testArch)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if strings.TrimSpace(img.Log) != "" {
		t.Errorf("%s: NVRTC warns:\n%s", name, firstLines(img.Log, 10))
	}
	return string(img.Data)
}

// TestNVRTCCompile compiles the generated code of test programs that
// hold every op, in both precisions, and checks the disk cache. (Of the
// random programs it takes a few: correctly rounded division and square
// root are long inline sequences, and NVRTC needs about 0.3 s for each of
// those programs.)
func TestNVRTCCompile(t *testing.T) {
	needNVRTC(t)
	t.Setenv("GRADSOLVE_CUDA_CACHE", t.TempDir())
	var tps []testProgram
	for _, tp := range allPrograms(t, 1) {
		if !strings.HasPrefix(tp.p.Name, "exact") || len(tps) < 3 {
			tps = append(tps, tp)
		}
	}
	precs := []Precision{Float64, Float32}
	if testing.Short() {
		precs = precs[:1]
	}
	for i, prec := range precs {
		src := kernelgen.NewSource(&kernelgen.SourceSettings{Precision: prec})
		for _, tp := range tps {
			if _, err := src.MapKernel(tp.p); err != nil {
				t.Fatal(err)
			}
		}
		img, err := driver.Compile(src.String(), testArch, nil)
		if err != nil {
			t.Fatalf("precision %d: %v", prec, err)
		}
		if len(img.Data) == 0 || img.Cached {
			t.Fatalf("precision %d: image of %d bytes, cached %v", prec, len(img.Data), img.Cached)
		}
		if !slices.Contains(img.Options, "--fmad=false") {
			t.Errorf("options %v lack --fmad=false", img.Options)
		}
		if strings.TrimSpace(img.Log) != "" {
			t.Errorf("precision %d: NVRTC warns:\n%s", prec, firstLines(img.Log, 20))
		}
		again, err := driver.Compile(src.String(), testArch, nil)
		if err != nil || !again.Cached || !bytes.Equal(again.Data, img.Data) {
			t.Errorf("second compilation: cached %v, same data %v, err %v", again.Cached, bytes.Equal(again.Data, img.Data), err)
		}
		if i > 0 {
			continue
		}
		fresh, err := driver.Compile(src.String(), testArch, &driver.CompileSettings{NoCache: true})
		if err != nil || fresh.Cached {
			t.Errorf("NoCache compilation: cached %v, err %v", fresh != nil && fresh.Cached, err)
		}
	}
}

// TestNVRTCFMAD checks that CompileSettings.FMA compiles with
// contraction, under a cache key of its own, and that contraction fuses
// a product and a sum the default keeps apart.
func TestNVRTCFMAD(t *testing.T) {
	needNVRTC(t)
	t.Setenv("GRADSOLVE_CUDA_CACHE", "off")
	const src = `extern "C" __global__ void k(double* x) { x[0] = x[1] * x[2] + x[3]; }`
	plain, err := driver.Compile(src, testArch, nil)
	if err != nil {
		t.Fatal(err)
	}
	fused, err := driver.Compile(src, testArch, &driver.CompileSettings{FMA: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(fused.Options, "--fmad=true") || slices.Contains(fused.Options, "--fmad=false") {
		t.Errorf("%s=1: options %v, want --fmad=true", "FMA", fused.Options)
	}
	if fused.Key == plain.Key || bytes.Equal(fused.Data, plain.Data) {
		t.Errorf("%s=1: same cache key %v, same image %v as without", "FMA", fused.Key == plain.Key, bytes.Equal(fused.Data, plain.Data))
	}
}

func TestNVRTCCompileError(t *testing.T) {
	needNVRTC(t)
	src := kernelgen.NewSource(nil).String() + "\nGS_GLOBAL void broken(gs_real* x) { x[0] = undefined_name; }\n"
	_, err := driver.Compile(src, testArch, &driver.CompileSettings{Name: "broken.cu", NoCache: true})
	var ce *driver.CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *driver.CompileError, got %v", err)
	}
	if !strings.Contains(ce.Log, "undefined_name") || !strings.Contains(ce.Log, "broken.cu") {
		t.Errorf("the log does not point at the error:\n%s", ce.Log)
	}
	if !strings.Contains(err.Error(), "undefined_name") {
		t.Errorf("the error does not show the log: %v", err)
	}
}
