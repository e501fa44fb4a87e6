package cuda

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

func TestZZDump(t *testing.T) {
	src := tileKernelSource(t, tileCase(8, []int{2, 32, 32, 2}, ode.Tsit5), ode.OpGrad)
	os.WriteFile("/tmp/tilegrad.cu", []byte(src), 0o644)
	l, err := loadNVRTC()
	if err != nil {
		t.Skip(err)
	}
	img := &Image{Options: []string{"--gpu-architecture=sm_90", "--fmad=false", "-std=c++17", "-default-device", "--ptxas-options=-v", "-DGS_CUDA", "-DGS_LANES_MINB=4"}}
	if err := l.compile(img, src, "zz.cu", true); err != nil {
		t.Fatal(err)
	}
	fmt.Println(img.Log)
	b := append([]byte(nil), img.Data...)
	b[6], b[0x14] = 1, 1
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Sections {
		if len(s.Name) > 5 && s.Name[:5] == ".text" {
			fmt.Println(s.Name, s.Size/16, "instructions")
		}
	}
}
