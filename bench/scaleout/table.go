package scaleout

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
)

// Case is a named workload of the table.
type Case struct {
	Name     string
	Workload Workload
}

// Row is one case on one cluster size: every algorithm's cost, simulated
// and in closed form.
type Row struct {
	Case   string
	Hosts  int
	GPUs   int
	PerGPU int // trajectories of the largest share
	Sim    [NumAlgorithms]Cost
	Closed [NumAlgorithms]Cost
}

// Rows simulates and predicts every algorithm for each case on c with each
// number of hosts (c.Hosts is ignored). The cost is that of the
// simulations: a few seconds for 128 hosts.
func Rows(c Cluster, hosts []int, cases []Case) ([]Row, error) {
	var rows []Row
	for _, cs := range cases {
		for _, h := range hosts {
			c.Hosts = h
			p := c.GPUs()
			row := Row{Case: cs.Name, Hosts: h, GPUs: p, PerGPU: ceilDiv(cs.Workload.Trajectories, p)}
			for a := Algorithm(0); a < NumAlgorithms; a++ {
				o, err := Simulate(&c, cs.Workload, a, nil)
				if err != nil {
					return nil, err
				}
				row.Sim[a] = o.Cost
				if row.Closed[a], err = Predict(&c, cs.Workload, a); err != nil {
					return nil, err
				}
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// MaxDeviation returns the largest relative difference between the
// simulated and the closed-form reduction times of rows.
func MaxDeviation(rows []Row) float64 {
	d := 0.0
	for _, r := range rows {
		for a := range r.Sim {
			if r.Closed[a].Reduce > 0 {
				d = math.Max(d, math.Abs(r.Sim[a].Reduce-r.Closed[a].Reduce)/r.Closed[a].Reduce)
			}
		}
	}
	return d
}

// WriteTable writes rows as Markdown tables, one per case: the compute of
// the largest share (ms), each algorithm's simulated reduction (µs), and
// for base and det the time per gradient (ms), the fraction of it spent
// reducing and the scaling efficiency against one GPU without any
// reduction.
func WriteTable(w io.Writer, rows []Row, base, det Algorithm) error {
	var b strings.Builder
	for i, r := range rows {
		if i == 0 || rows[i-1].Case != r.Case {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%s\n\n", r.Case)
			fmt.Fprintf(&b, "| hosts | GPUs | traj./GPU | compute (ms) |")
			for a := Algorithm(0); a < NumAlgorithms; a++ {
				fmt.Fprintf(&b, " %s (µs) |", a)
			}
			for _, a := range []Algorithm{base, det} {
				fmt.Fprintf(&b, " grad, %[1]s (ms) | comm., %[1]s | eff., %[1]s |", a)
			}
			b.WriteString("\n|" + strings.Repeat("---:|", 4+int(NumAlgorithms)+6) + "\n")
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %.3f |", r.Hosts, r.GPUs, pow2(r.PerGPU), 1e3*r.Sim[0].Compute)
		for a := range r.Sim {
			fmt.Fprintf(&b, " %.1f |", 1e6*r.Sim[a].Reduce)
		}
		for _, a := range []Algorithm{base, det} {
			c := r.Sim[a]
			fmt.Fprintf(&b, " %.3f | %.2f%% | %.1f%% |", 1e3*c.Total(), 100*c.CommFraction(), 100*c.Efficiency())
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pow2 writes n as 2^k when it is a power of two.
func pow2(n int) string {
	if n > 0 && n&(n-1) == 0 {
		return fmt.Sprintf("2^%d", bits.TrailingZeros(uint(n)))
	}
	return fmt.Sprint(n)
}
