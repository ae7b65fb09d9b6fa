package jobs

// EncodeArgsForTest encodes args as EnqueueArgs does for job.
func EncodeArgsForTest[T any](job string, args T) ([]byte, error) {
	r, err := withArgs(NewRun{Job: job}, args, nil)
	return r.Args, err
}
