package spec

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// queueSet is what the jobs need to know of the declared queues.
type queueSet struct {
	// list holds the declared queues, in file order.
	list []Queue
	// names holds every name written under queues:, valid or not, in file
	// order, so that a job naming a queue whose declaration has an error
	// is not reported again.
	names []string
	// checkable is false when queues: itself is broken (not a list, or
	// empty); then the queues jobs name are not checked against it.
	checkable bool
}

// external reports whether name is a declared external queue.
func (qs *queueSet) external(name string) bool {
	for _, q := range qs.list {
		if q.Name == name {
			return q.External
		}
	}
	return false
}

// queues validates the list of queues; v.key is nil when there is none.
func (l *loader) queues(v value, hasJobs bool) *queueSet {
	qs := &queueSet{checkable: true}
	if v.key == nil {
		return qs
	}
	if !hasJobs {
		l.errorf(v.key, "remove queues, or declare jobs that use them", "queues are declared but there are no jobs")
		return qs
	}
	items, ok := l.list(v)
	if !ok {
		qs.checkable = false
		return qs
	}
	if len(items) == 0 {
		l.errorf(v.node, "remove queues to use only the queue default, or declare one, e.g. "+v.field.example, "queues is empty")
		qs.checkable = false
		return qs
	}
	seen := map[string]*yaml.Node{}
	for _, item := range items {
		qs.list = append(qs.list, l.queue(resolve(item), seen, qs))
	}
	return qs
}

// queue validates one queue and applies its defaults.
func (l *loader) queue(n *yaml.Node, seen map[string]*yaml.Node, qs *queueSet) Queue {
	q := Queue{Pos: pos(n), Concurrency: DefaultQueueConcurrency}
	fields, ok := l.mapping(n, "each queue", "- {name: mail, concurrency: 10}", "", queueFields)
	if !ok {
		return q
	}
	if v, ok := fields["name"]; ok {
		if v.node.Kind == yaml.ScalarNode {
			qs.names = append(qs.names, v.node.Value)
		}
		q.Name = l.snakeName(v, "queue name")
		if first, dup := seen[q.Name]; dup {
			l.errorf(v.node, fmt.Sprintf("it is first declared at line %d; queue names must be unique", first.Line),
				"duplicate queue name %q", q.Name)
			q.Name = ""
		} else if q.Name != "" {
			seen[q.Name] = v.node
		}
	}
	if v, ok := fields["concurrency"]; ok {
		q.Concurrency = l.intRange(v, minQueueConcurrent, maxQueueConcurrent, "how many of its runs each node handles at once")
	}
	if v, ok := fields["external"]; ok {
		q.External, _ = l.boolean(v)
		if c, ok := fields["concurrency"]; ok && q.External {
			l.errorf(c.key, "remove concurrency: the consumers of an external queue decide how many of its runs they handle at once",
				"external queue %q takes no concurrency", q.Name)
		}
	}
	return q
}
