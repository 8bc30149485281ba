package scrape

import (
	"reflect"
	"testing"
)

const exposition = `# HELP readyspan_watch_events_total Watch notifications received.
# TYPE readyspan_watch_events_total counter
readyspan_watch_events_total{resource="pods"} 120
readyspan_watch_events_total{resource="events"} 300
# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="readyspan-scale",priority_level="readyspan-scale"} 42
apiserver_flowcontrol_dispatched_requests_total{flow_schema="readyspan-scale",priority_level="other"} 3
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 1000
# TYPE readyspan_pods_in_flight gauge
readyspan_pods_in_flight 7
`

func TestByLabel(t *testing.T) {
	fams, err := Families(Text(exposition))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, metric, label string
		match               map[string]string
		want                map[string]float64
	}{
		{name: "by resource", metric: "readyspan_watch_events_total", label: "resource", want: map[string]float64{"pods": 120, "events": 300}},
		{name: "summed over another label", metric: "apiserver_flowcontrol_dispatched_requests_total", label: "flow_schema", want: map[string]float64{"readyspan-scale": 45, "exempt": 1000}},
		{name: "matching", metric: "apiserver_flowcontrol_dispatched_requests_total", label: "flow_schema", match: map[string]string{"priority_level": "readyspan-scale"}, want: map[string]float64{"readyspan-scale": 42}},
		{name: "gauge without labels", metric: "readyspan_pods_in_flight", label: "", want: map[string]float64{"": 7}},
		{name: "absent", metric: "nope", label: "x", want: map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ByLabel(fams, tt.metric, tt.label, tt.match); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	got := Diff(map[string]float64{"a": 5, "b": 2, "c": 1}, map[string]float64{"a": 3, "b": 2})
	want := map[string]float64{"a": 2, "c": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %v, want %v", got, want)
	}
	if Sum(got) != 3 {
		t.Errorf("Sum = %v", Sum(got))
	}
}

// The apiserver's histograms, as its /metrics shows them: the sums and counts by a label, over
// every other label's values.
func TestHistogramByLabel(t *testing.T) {
	const text = `# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="1024"} 2
apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="+Inf"} 5
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 20480
apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 5
apiserver_watch_events_sizes_bucket{group="apps",resource="replicasets",version="v1",le="+Inf"} 1
apiserver_watch_events_sizes_sum{group="apps",resource="replicasets",version="v1"} 900
apiserver_watch_events_sizes_count{group="apps",resource="replicasets",version="v1"} 1
`
	fams, err := Families(Text(text))
	if err != nil {
		t.Fatal(err)
	}
	sum, count := HistogramByLabel(fams, "apiserver_watch_events_sizes", "resource", nil)
	if want := map[string]float64{"pods": 20480, "replicasets": 900}; !reflect.DeepEqual(sum, want) {
		t.Errorf("sums %v, want %v", sum, want)
	}
	if want := map[string]float64{"pods": 5, "replicasets": 1}; !reflect.DeepEqual(count, want) {
		t.Errorf("counts %v, want %v", count, want)
	}
	sum, _ = HistogramByLabel(fams, "apiserver_watch_events_sizes", "", map[string]string{"group": "apps"})
	if want := map[string]float64{"": 900}; !reflect.DeepEqual(sum, want) {
		t.Errorf("matching group apps: %v, want %v", sum, want)
	}
	if sum, _ := HistogramByLabel(fams, "nope", "x", nil); len(sum) != 0 {
		t.Errorf("absent: %v", sum)
	}
}
