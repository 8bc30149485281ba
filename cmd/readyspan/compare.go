package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/readyspan/readyspan/compare"
	"github.com/readyspan/readyspan/compare/source"
	"github.com/readyspan/readyspan/safetext"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web/apiclient"
)

// compareFlags are `readyspan compare`'s flags.
type compareFlags struct {
	output, report string
	url, tokenFile string
	caFile         string
	namespace      string
	workload       string
	allowPartial   bool
	stuckAfter     time.Duration
	failAfter      time.Duration
	opts           compare.Options
	resamples      int
	seed           uint64
	level          float64
}

func (c *compareFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&c.output, "output", "o", "text", "output: text or json")
	fs.StringVar(&c.report, "report", "", "also write the comparison as one self-contained HTML page to this file")
	fs.StringVar(&c.url, "url", "", "a running readyspan's UI (http://host:8080): a side written SINCE..UNTIL is a window of its ring")
	fs.StringVar(&c.tokenFile, "token-file", "", "with --url: a file holding the bearer token the daemon asks for (readyspan run --metrics-secure)")
	fs.StringVar(&c.caFile, "ca-file", "", "with an https --url: the PEM certificates to trust for it (default: the system's)")
	fs.StringVar(&c.namespace, "namespace", "", "with --url: only the Pods of this namespace")
	fs.StringVar(&c.workload, "workload", "", "with --url: only the Pods of this workload")
	fs.BoolVar(&c.allowPartial, "allow-partial", false, "compare a recording with unreadable or refused lines anyway")
	fs.DurationVar(&c.stuckAfter, "stuck-after", tracer.DefaultStuckAfter, "replaying a recording: a Pod not Ready this long after creation is stuck (not compared)")
	fs.DurationVar(&c.failAfter, "fail-after", tracer.DefaultFailAfter, "replaying a recording: a Pod whose failure persists this long has failed (not compared)")
	fs.IntVar(&c.resamples, "resamples", compare.DefaultResamples, "bootstrap resamples")
	fs.Uint64Var(&c.seed, "seed", compare.DefaultSeed, "the bootstrap's seed: the same sets and seed give the same intervals")
	fs.Float64Var(&c.level, "level", compare.DefaultLevel, "the intervals' confidence level")
}

func (c *compareFlags) validate() error {
	if c.output != "text" && c.output != "json" {
		return fmt.Errorf("unknown output %q: use text or json", c.output)
	}
	c.opts = compare.Options{Resamples: c.resamples, Seed: c.seed, Level: c.level}
	if err := c.opts.Validate(); err != nil {
		return fmt.Errorf("--resamples or --level: %w", err)
	}
	if c.url == "" && (c.tokenFile != "" || c.caFile != "" || c.namespace != "" || c.workload != "") {
		return errors.New("--token-file, --ca-file, --namespace and --workload read a daemon: give its --url")
	}
	return nil
}

// runCompare is `readyspan compare A B`: is B slower than A, by how much, and because of what.
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare", "A B [flags]   (each a recording directory, a file of exported traces, or SINCE..UNTIL with --url)", stderr)
	var cf compareFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := cf.validate(); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 2 {
		return errors.New("compare needs two arguments: the sets A and B (B is compared against A)")
	}
	var sets [2]compare.Set
	for i, arg := range pos {
		s, err := cf.side(ctx, arg)
		if err != nil {
			return err
		}
		sets[i] = s
	}
	res, err := compare.Compare(sets[0], sets[1], cf.opts)
	if err != nil {
		return err
	}
	if cf.report != "" {
		if err := writeCompareReport(cf.report, res); err != nil {
			return err
		}
	}
	w := safetext.NewWriter(stdout)
	defer w.Flush()
	if cf.output == "json" {
		return compare.WriteJSON(w, res)
	}
	return compare.WriteText(w, res)
}

// side reads one side: a window of the daemon's ring, else a path.
func (c *compareFlags) side(ctx context.Context, arg string) (compare.Set, error) {
	since, until, isWindow, err := source.ParseWindow(arg, time.Now())
	if err != nil {
		return compare.Set{}, err
	}
	if !isWindow {
		return source.Path(arg, tracer.Config{StuckAfter: c.stuckAfter, FailAfter: c.failAfter}, c.allowPartial)
	}
	if c.url == "" {
		return compare.Set{}, fmt.Errorf("%s is a window of a daemon's ring: give the daemon's --url", arg)
	}
	live, err := c.live()
	if err != nil {
		return compare.Set{}, err
	}
	return live.Window(ctx, arg, since, until)
}

// live is the client of the daemon --url names.
func (c *compareFlags) live() (*source.Live, error) {
	api, err := apiclient.New(apiclient.Config{URL: c.url, TokenFile: c.tokenFile, CAFile: c.caFile})
	if err != nil {
		return nil, err
	}
	return &source.Live{API: api, Namespace: c.namespace, Workload: c.workload}, nil
}

// writeCompareReport writes the HTML page to path.
func writeCompareReport(path string, res *compare.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	if err := compare.WriteHTML(f, res); err != nil {
		f.Close()
		return fmt.Errorf("--report %s: %w", path, err)
	}
	return f.Close()
}
