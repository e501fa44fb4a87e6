package lossform

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

func TestZZ(t *testing.T) {
	sh := Shape{D: 4, K: 3}
	g := lossGradOf(t, sh, 0, func(_, ys, _, _, _ []tape.V) tape.V {
		s := ys[0].Square()
		for _, x := range ys[1:] {
			s = s.Add(x.Square())
		}
		return s
	})
	sc, _ := SplitSaveCots(g, sh)
	fmt.Println(sc.Comp[0], sc.From[0])
	fmt.Println(sc.Rest)
	f, _ := SplitFold(sc.Rest, sh)
	fmt.Println(f.First, f.Next, f.End, f.Rest)
}
