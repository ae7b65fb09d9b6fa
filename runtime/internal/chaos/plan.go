package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
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
	FaultCrash     = "crash"     // SIGKILL the database server, start it again after Dur (crash recovery)
	// FaultPartition: Lead of Arg delay on every chunk (so that
	// transactions are in flight: a claim started as the delay began has
	// its SELECT … FOR UPDATE delivered after 3·Arg and its COMMIT after
	// 7·Arg), then a partition for Dur: nothing gets
	// through, and the server sides of the connections stay open after
	// the process closes them (as in a real partition), holding their
	// transactions and locks until the server closes them.
	FaultPartition = "partition"
	// FaultOutage: the process's connections are cut and new ones
	// refused, for longer than the retained job's retention (1 m), while
	// the other processes run and prune: its statements fail fast for
	// minutes.
	FaultOutage = "outage"
	// FaultRotate: the process's password is changed and its sessions are
	// killed, for Dur: every new connection fails with error 1045, as
	// after a password rotation the process missed. Short, or as long as
	// an outage.
	FaultRotate = "rotate"
	// FaultLockRows: an admin transaction holds Arg running runs' rows
	// locked (SELECT … FOR UPDATE) for Dur, several run leases.
	FaultLockRows = "lockrows"
	// Faults of one node of a cluster (Fault.Node), planned instead of
	// the server's restart and crash when the run has nodes
	// (Config.Nodes), one node at a time so that the others keep a
	// majority: FaultNodeKill SIGKILLs the node and starts it again after
	// Dur (it rejoins with a state transfer); FaultNodePause SIGSTOPs it
	// for Dur, longer than every TTL (its peers evict it; its clients'
	// statements hang), then SIGCONTs it; FaultNodeIsolate cuts it off
	// from its peers for Dur while its clients still reach it (Galera's
	// gmcast.isolate: it leaves the primary component and refuses
	// statements).
	FaultNodeKill    = "nodekill"
	FaultNodePause   = "nodepause"
	FaultNodeIsolate = "isolate"
)

// Fault is one planned fault.
type Fault struct {
	At   time.Duration // after the run's start
	Kind string
	Proc int // -1 for the server or a node
	Node int // the node of a node fault
	Dur  time.Duration
	Arg  time.Duration // the delay, the clock step, the pool size or the rows
	// Lead is how long a partition's delay lasts before the partition.
	Lead time.Duration
}

func (f Fault) String() string {
	target := fmt.Sprintf("p%d", f.Proc)
	switch {
	case f.nodeFault():
		target = fmt.Sprintf("node%d", f.Node)
	case f.Proc < 0:
		target = "server"
	}
	s := fmt.Sprintf("%7s %-9s %-6s for %s", f.At.Round(time.Millisecond), f.Kind, target, f.Dur.Round(time.Millisecond))
	switch f.Kind {
	case FaultDelay, FaultClock:
		s += fmt.Sprintf(" (%s)", f.Arg)
	case FaultPartition:
		s += fmt.Sprintf(" (after %s of %s delay)", f.Lead.Round(time.Millisecond), f.Arg.Round(time.Millisecond))
	case FaultPool:
		s += fmt.Sprintf(" (%d connections)", f.Arg)
	case FaultLockRows:
		s += fmt.Sprintf(" (%d runs)", f.Arg)
	}
	return s
}

// nodeRejoin is about how long a killed node takes to start and rejoin
// its cluster on loopback, with a state transfer.
const nodeRejoin = 15 * time.Second

// nodeFault reports whether f is a fault of one node of a cluster.
func (f Fault) nodeFault() bool {
	switch f.Kind {
	case FaultNodeKill, FaultNodePause, FaultNodeIsolate:
		return true
	}
	return false
}

// Plan bounds.
const (
	// LongFaultsFrom is the shortest run that plans long faults (outages
	// and long rotations, longer than the retention): one at a time, the
	// first 15–30 s in, each 70–130 s, 60–150 s apart, each ending at
	// least 30 s before the end of the faults.
	LongFaultsFrom = 3 * time.Minute
	// PartitionGap is the least time between two partitions: a partition
	// may leave up to a pool of server sessions open until the
	// keep-alive stand-in closes them (see Config.KeepAlive).
	PartitionGap = 30 * time.Second
)

// Plan draws the faults of a run from seed: one every 1–3 s on a random
// process (or, for lockrows, the server), at most two at once and never
// two on one process, each longer than the TTLs where it matters; long
// faults besides (see LongFaultsFrom), which do not count towards the two
// at once; and one server restart at about the middle when restart is
// set: a crash (SIGKILL) for an odd seed, a shutdown for an even one. The
// same seed gives the same plan.
func Plan(seed uint64, procs int, length time.Duration, restart bool) []Fault {
	return PlanCluster(seed, procs, 0, length, restart)
}

// PlanCluster is Plan for a cluster of nodes nodes (0: one server): the
// server's restart is left out, and a node fault (FaultNodeKill,
// FaultNodePause, FaultNodeIsolate) starts every 4–8 s on a random node,
// one at a time, beside the processes' faults.
func PlanCluster(seed uint64, procs, nodes int, length time.Duration, restart bool) []Fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	kinds := []string{FaultKill, FaultKill, FaultPause, FaultPause, FaultCut, FaultBlackhole, FaultBlackhole,
		FaultDelay, FaultClock, FaultPool, FaultPartition, FaultPartition, FaultRotate, FaultLockRows}
	busy := make([]time.Duration, procs) // when each process is free again
	var plan []Fault
	var ends []time.Duration // ends of the planned short faults, to keep at most two at once
	restartAt := length / 2
	long := length >= LongFaultsFrom
	nextLong := between(15*time.Second, 30*time.Second)
	lastPartition := -PartitionGap
	if nodes > 0 {
		restart = false
		nodeKinds := []string{FaultNodeKill, FaultNodePause, FaultNodeIsolate}
		for at := between(3*time.Second, 6*time.Second); at < length-10*time.Second; {
			f := Fault{At: at, Kind: nodeKinds[rng.IntN(len(nodeKinds))], Proc: -1, Node: rng.IntN(nodes)}
			switch f.Kind {
			case FaultNodeKill:
				f.Dur = between(time.Second, 5*time.Second)
			case FaultNodePause:
				// Its peers evict a silent node after evs.suspect_timeout
				// (5 s): some pauses end before, some after.
				f.Dur = between(3*time.Second, 12*time.Second)
			case FaultNodeIsolate:
				// An isolated node leaves the primary component after
				// the suspect timeout too.
				f.Dur = between(6*time.Second, 15*time.Second)
			}
			plan = append(plan, f)
			// A killed node takes a while to rejoin (the fault ends
			// when it is synced again: 10–25 s on loopback), and the
			// next node fault waits for it anyway; plan it after.
			at += f.Dur + between(4*time.Second, 8*time.Second)
			if f.Kind == FaultNodeKill {
				at += nodeRejoin
			}
		}
	}
	for at := between(time.Second, 3*time.Second); at < length-2*time.Second; at += between(time.Second, 3*time.Second) {
		if restart && at >= restartAt {
			kind := FaultRestart
			if seed%2 == 1 {
				kind = FaultCrash
			}
			plan = append(plan, Fault{At: at, Kind: kind, Proc: -1, Dur: between(time.Second, 3*time.Second)})
			restart = false
			at += 8 * time.Second
			continue
		}
		if long && at >= nextLong {
			dur := between(70*time.Second, 130*time.Second)
			if at+dur > length-30*time.Second {
				long = false
			} else if p := rng.IntN(procs); busy[p] <= at {
				kind := FaultOutage
				if rng.IntN(3) == 0 {
					kind = FaultRotate
				}
				plan = append(plan, Fault{At: at, Kind: kind, Proc: p, Dur: dur})
				busy[p] = at + dur + 500*time.Millisecond
				nextLong = at + dur + between(60*time.Second, 150*time.Second)
				continue
			}
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
		f := Fault{At: at, Kind: kinds[rng.IntN(len(kinds))], Proc: rng.IntN(procs)}
		if f.Kind == FaultPartition && at-lastPartition < PartitionGap {
			f.Kind = FaultBlackhole
		}
		if f.Kind == FaultLockRows {
			f.Proc = -1
		} else if busy[f.Proc] > at {
			continue
		}
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
		case FaultPartition:
			f.Dur = between(2*time.Second, 5*time.Second)
			f.Arg = between(100*time.Millisecond, 250*time.Millisecond)
			f.Lead = between(2*f.Arg, 6*f.Arg)
			lastPartition = at
		case FaultRotate:
			f.Dur = between(2*time.Second, 6*time.Second)
		case FaultLockRows:
			f.Dur = between(3*time.Second, 12*time.Second)
			f.Arg = time.Duration(1 + rng.IntN(3))
		}
		end := at + f.Dur
		end += f.Lead
		if f.Proc >= 0 {
			busy[f.Proc] = end + 500*time.Millisecond
		}
		ends = append(ends, end)
		plan = append(plan, f)
	}
	slices.SortStableFunc(plan, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
	return plan
}
