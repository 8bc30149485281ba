// Package exposed lists what readyspan's metrics are called on a scrape, read from the
// collectors exporters/prometheus registers, so the tests of the alerting rules and of the
// dashboard can tell a query of a real metric from one of a renamed or misspelt one.
package exposed

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"

	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/tracer"
)

// Metrics are the names readyspan's metrics are scraped under.
type Metrics struct {
	// Series are the series names a query can select: a histogram's _bucket, _count and _sum,
	// any other metric's own name.
	Series map[string]bool
	// Families are the metric names as registered: a histogram by its base name, as prose
	// refers to it.
	Families map[string]bool
}

// Read registers readyspan's metrics with a new registry and reads their descriptions, so
// nothing needs to be observed first (a histogram vector without observations gathers nothing).
func Read() (Metrics, error) {
	reg := &capture{Registerer: prometheus.NewRegistry()}
	promexp.New(reg, "test", tracer.Kinds.RolloutKinds(), promexp.Options{})
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	m := Metrics{Series: map[string]bool{}, Families: map[string]bool{}}
	for _, c := range reg.collectors {
		descs := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			name := fqName.FindStringSubmatch(d.String())
			if name == nil {
				return Metrics{}, fmt.Errorf("no name in %s", d)
			}
			m.Families[name[1]] = true
			switch c.(type) {
			case prometheus.Histogram, *prometheus.HistogramVec:
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					m.Series[name[1]+suffix] = true
				}
			default:
				m.Series[name[1]] = true
			}
		}
	}
	if len(m.Series) == 0 {
		return Metrics{}, errors.New("exporters/prometheus registered no metric")
	}
	return m, nil
}

// capture keeps the collectors registered through it.
type capture struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (c *capture) Register(col prometheus.Collector) error {
	c.collectors = append(c.collectors, col)
	return c.Registerer.Register(col)
}

func (c *capture) MustRegister(cols ...prometheus.Collector) {
	c.collectors = append(c.collectors, cols...)
	c.Registerer.MustRegister(cols...)
}
