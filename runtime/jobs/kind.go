package jobs

// Kind is a declared job typed by its arguments: the generated package
// declares one per job that can be enqueued (<Job>Kind, such as
// SendReceiptKind of type Kind[SendReceiptArgs]), so that helpers that
// take a job and its arguments, such as lockgentest.RequireEnqueued, have
// them checked together at compile time. A job without arguments is a
// Kind[struct{}].
type Kind[T any] struct {
	// Name is the job's name; Queue the queue its runs go to.
	Name, Queue string
	// TablePrefix is the prefix of the package's tables (lockgen.yaml's
	// table_prefix): the runs are in the table TablePrefix + "runs".
	TablePrefix string
}
