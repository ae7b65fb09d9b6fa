package ops

import "time"

// Statements returns the layer's read statements with example arguments,
// for the EXPLAIN test.
func (o *Ops) Statements() map[string][]any {
	q := o.q
	return map[string][]any{
		"leaders":           append([]any{q.leaders + inList(2)}, "master", "other"),
		"lockCount":         {q.lockCount, "orders", 10000},
		"lockMarks":         {q.lockMarks, "orders", 10000},
		"locksScan":         {q.locksScan, "orders", "orders", "k0100", ScanLimit},
		"locksScanName":     {q.locksScanName, "orders", "k0100", ScanLimit},
		"locksScanNameFrom": {q.locksScanNameFrom, "orders", "", ScanLimit},
		"queueCounts":       {q.queueCounts, "default", 10000, "default", 10000, "default", 10000, "default", 10000},
		"queuesRows":        {q.queuesRows},
		"queueGet":          {q.queueGet, "default"},
		"lastTick":          {q.lastTick, "tick"},
		"runsScan":          {q.runsScan, 1500, ScanLimit},
		"runsList":          {q.runsList + inList(3), 10, 11, 12},
		"runGet":            {q.runGet, 10},
		"runsClaims":        {q.runsClaims + inList(2), 10, 11},
		"retryScan":         {q.retryScan, "discarded", "test", "2000-01-01 00:00:00", "2000-01-01 00:00:00", 0, "9999-01-01 00:00:00", 500},
	}
}

// SetClaimFromFirstEveryForTest sets how long o's claims may go on from a
// place (claimFromFirstEvery by default): a test that checks the places
// claims go on from must not depend on the machine's speed.
func SetClaimFromFirstEveryForTest(o *Ops, d time.Duration) { o.fromFirstEvery = d }
