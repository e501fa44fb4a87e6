package cname

import "testing"

func TestIdent(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "p"},
		{"lorenz", "lorenz"},
		{"Tsit5 step·VJP", "Tsit5_step_VJP"},
		{"a-b.c", "a_b_c"},
		{"0123456789012345678901234567890123456789xyz", "0123456789012345678901234567890123456789"},
	} {
		if got := Ident(c.in); got != c.want {
			t.Errorf("Ident(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
