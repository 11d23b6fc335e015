package pubsub_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/holdfast/holdfast/internal/redistest"
	"github.com/holdfast/holdfast/pubsub"
)

// BenchmarkHeapPerChannel reports what one more subscribed channel costs
// the process, heap and goroutine stacks together, on each transport: the
// shared one runs a goroutine per channel, a dedicated connection keeps
// only the Manager's records.
//
//	go test -run '^$' -bench HeapPerChannel -benchtime 2000x ./pubsub
func BenchmarkHeapPerChannel(b *testing.B) {
	for _, tr := range []struct {
		name      string
		dedicated bool
	}{{"shared", false}, {"dedicated", true}} {
		b.Run(tr.name, func(b *testing.B) {
			srv := redistest.Start(b)
			m := pubsub.New(pubsub.Config{Redis: srv.Client(b), Dedicated: tr.dedicated})
			defer m.Close()
			// One channel first, so that the connection and the
			// Manager's goroutines are up before the baseline.
			first := newRecorder()
			defer m.Subscribe("first", first.fn)()
			<-first.ch
			before := memInUse()
			b.ResetTimer()
			recs := make([]*recorder, b.N)
			for i := range recs {
				recs[i] = &recorder{ch: make(chan pubsub.Event, 1)}
				defer m.Subscribe(fmt.Sprintf("heap:%d", i), recs[i].fn)()
			}
			for _, r := range recs {
				<-r.ch
			}
			b.StopTimer()
			after := memInUse()
			b.ReportMetric(float64(after-before)/float64(b.N), "bytes/channel")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// memInUse is the heap in use plus goroutine stacks, after a collection.
func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}
