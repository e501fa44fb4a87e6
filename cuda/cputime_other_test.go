//go:build !unix

package cuda

import "time"

// procCPU returns 0: the process CPU time is not measured on this system.
func procCPU() time.Duration { return 0 }
