package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Fault kinds.
const (
	FaultKill      = "kill"      // SIGKILL, then restart after Dur
	FaultPause     = "pause"     // SIGSTOP for Dur, then SIGCONT
	FaultCut       = "cut"       // close the process's connections, refuse new ones for Dur
	FaultBlackhole = "blackhole" // connections stay open but carry nothing, for Dur
	FaultDelay     = "delay"     // every chunk of the process's traffic waits Arg, for Dur
	FaultClock     = "clock"     // step the process's wall clock by Arg, and back after Dur
	FaultPool      = "pool"      // shrink the process's pool to Arg connections for Dur
	FaultRestart   = "restart"   // shut the database server down and start it again
)

// Fault is one planned fault.
type Fault struct {
	At   time.Duration // after the run's start
	Kind string
	Proc int // -1 for the server
	Dur  time.Duration
	Arg  time.Duration // the delay, the clock step, or the pool size
}

func (f Fault) String() string {
	target := fmt.Sprintf("p%d", f.Proc)
	if f.Proc < 0 {
		target = "server"
	}
	s := fmt.Sprintf("%7s %-9s %-6s for %s", f.At.Round(time.Millisecond), f.Kind, target, f.Dur.Round(time.Millisecond))
	switch f.Kind {
	case FaultDelay, FaultClock:
		s += fmt.Sprintf(" (%s)", f.Arg)
	case FaultPool:
		s += fmt.Sprintf(" (%d connections)", f.Arg)
	}
	return s
}

// Plan draws the faults of a run from seed: one every 1–3 s on a random
// process, at most two at once and never two on one process, each
// longer than the TTLs where it matters, and one server restart at about
// the middle when restart is set. The same seed gives the same plan.
func Plan(seed uint64, procs int, length time.Duration, restart bool) []Fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	kinds := []string{FaultKill, FaultKill, FaultPause, FaultPause, FaultCut, FaultBlackhole, FaultBlackhole, FaultDelay, FaultClock, FaultPool}
	busy := make([]time.Duration, procs) // when each process is free again
	var plan []Fault
	var ends []time.Duration // ends of the planned faults, to keep at most two at once
	restartAt := length / 2
	for at := between(time.Second, 3*time.Second); at < length-2*time.Second; at += between(time.Second, 3*time.Second) {
		if restart && at >= restartAt {
			plan = append(plan, Fault{At: at, Kind: FaultRestart, Proc: -1, Dur: between(time.Second, 3*time.Second)})
			restart = false
			at += 8 * time.Second
			continue
		}
		running := 0
		for _, e := range ends {
			if e > at {
				running++
			}
		}
		if running >= 2 {
			continue
		}
		p := rng.IntN(procs)
		if busy[p] > at {
			continue
		}
		f := Fault{At: at, Kind: kinds[rng.IntN(len(kinds))], Proc: p}
		switch f.Kind {
		case FaultKill:
			f.Dur = between(200*time.Millisecond, 2*time.Second)
		case FaultPause, FaultCut, FaultBlackhole:
			f.Dur = between(1500*time.Millisecond, 4*time.Second)
		case FaultDelay:
			f.Dur = between(2*time.Second, 5*time.Second)
			f.Arg = between(100*time.Millisecond, 1500*time.Millisecond)
		case FaultClock:
			f.Dur = between(3*time.Second, 10*time.Second)
			f.Arg = time.Hour
			if rng.IntN(2) == 0 {
				f.Arg = -time.Hour
			}
		case FaultPool:
			f.Dur = between(3*time.Second, 10*time.Second)
			f.Arg = time.Duration(1 + rng.IntN(2))
		}
		busy[p] = at + f.Dur + 500*time.Millisecond
		ends = append(ends, at+f.Dur)
		plan = append(plan, f)
	}
	return plan
}
