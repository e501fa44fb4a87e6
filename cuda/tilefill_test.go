package cuda

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
)

// BenchmarkGPUTileFill times the gradient with the record (kernel-ms/op;
// ms/op the whole call) of neural fields in lanes mode and in tile mode
// (a warp per tile of kernelgen.TileWidth trajectories, the layers as
// tensor-core products), each forced, beside the default (tile mode from
// 3 tiles a multiprocessor: kernelgen.TileModeFills), at n = 1,024,
// 4,096 and 16,384 (the first under that threshold on an H100): the 2-32-32-2
// MLP field of mlpCase (Tsit5, shared weights) and neural Robertson
// (Rodas5P, layoutFillCase), three rounds (later names end in #01,
// #02). It measures where tile mode's threshold belongs:
//
//	cuda.test -test.run XXX -test.bench 'GPUTileFill' -test.benchtime 5x
func BenchmarkGPUTileFill(b *testing.B) {
	needGPUEngine(b)
	cases := map[string]engineCase{}
	for range 3 {
		for _, n := range []int{1024, 4096, 16384} {
			for _, name := range []string{"mlp-2-32-32-2", "neural-robertson"} {
				key := fmt.Sprintf("%s/n=%d", name, n)
				c, ok := cases[key]
				if !ok {
					if name == "neural-robertson" {
						c = layoutFillCase(b, name, n)
					} else {
						c = mlpCase(n, []int{2, 32, 32, 2})
					}
					cases[key] = c
				}
				def := "lanes"
				if kernelgen.TileModeFills(n, 132) {
					def = "tile"
				}
				for _, v := range []struct {
					name, layout string
					tun          Tuning
				}{
					{"default", def, Tuning{}},
					{"lanes", "lanes", Tuning{Layout: LayoutLanes}},
					{"tile", "tile", Tuning{Layout: LayoutTile}},
				} {
					engine := tuned(b, "cuda", v.tun)
					b.Run(fmt.Sprintf("grad/%s/%s", key, v.name), func(b *testing.B) {
						if err := benchLayout(b, c, "grad", engine, v.layout); err != nil {
							b.Skip(err)
						}
					})
				}
			}
		}
	}
}
