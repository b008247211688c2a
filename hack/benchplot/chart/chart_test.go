package chart

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/results"
)

// scale is one scale whose proxies took the given table-complete and CPU
// times, one round per value.
func scale(services int, kp, ours []float64) results.Selected {
	s := results.Selected{From: results.File{Name: "20261127-214358.json", When: time.Date(2026, 11, 27, 21, 43, 58, 0, time.UTC)}}
	s.Services = services
	for proxy, vs := range map[string][]float64{results.KubeProxy: kp, results.Ours: ours} {
		for round, v := range vs {
			s.Runs = append(s.Runs, results.Run{Proxy: proxy, Round: round, Services: services, Measurements: []results.Measurement{
				{Name: results.TableComplete, Value: v, Unit: "s"}, {Name: results.CPUUntilTable, Value: v * 1.5, Unit: "s"}}})
		}
	}
	return s
}

// svgCounts parses the SVG, failing on invalid XML, and counts its path
// elements and collects its text.
func svgCounts(t *testing.T, b []byte) (paths int, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return paths, texts
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			paths += map[bool]int{true: 1}[tok.Name.Local == "path"]
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(tok)))
			}
		case xml.EndElement:
			inText = false
		}
	}
}

func TestSVGWritesEachMedianAndWhiskersOnlyOverSeveralRounds(t *testing.T) {
	one := []results.Selected{scale(1000, []float64{15.3}, []float64{3.98}), scale(5000, []float64{72.3}, []float64{22.2})}
	three := []results.Selected{scale(1000, []float64{13, 15.3, 20}, []float64{3, 3.98, 8}), scale(5000, []float64{70, 72.3, 80}, []float64{20, 22.2, 25})}

	for _, tc := range []struct {
		name      string
		sel       []results.Selected
		wantTexts []string
	}{
		{"one round", one, []string{"15.3", "3.98", "72.3", "22.2", "23.0", "5.97", "108", "33.3", "Nov 27, 1 round", "1,000", "5,000", "kube-proxy", "ours"}},
		{"three rounds", three, []string{"15.3", "3.98", "72.3", "22.2", "Nov 27, 3 rounds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := SVG(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			_, texts := svgCounts(t, b)
			for _, want := range tc.wantTexts {
				found := false
				for _, txt := range texts {
					found = found || txt == want
				}
				if !found {
					t.Errorf("no text %q in the SVG's %q", want, texts)
				}
			}
			again, err := SVG(tc.sel)
			if err != nil || !bytes.Equal(b, again) {
				t.Errorf("a second render differs (err %v): -check would never pass", err)
			}
		})
	}

	// Four whiskers per panel (two proxies × two scales) over three rounds,
	// none over one: the difference in path elements is the whiskers.
	b1, _ := SVG(one)
	b3, _ := SVG(three)
	p1, _ := svgCounts(t, b1)
	p3, _ := svgCounts(t, b3)
	if p3 <= p1 {
		t.Errorf("three rounds drew %d paths, one round %d: no whiskers", p3, p1)
	}
	half := scale(1000, []float64{15.3}, []float64{3, 4, 8})
	bh, _ := SVG([]results.Selected{half})
	b0, _ := SVG([]results.Selected{scale(1000, []float64{15.3}, []float64{3.98})})
	ph, _ := svgCounts(t, bh)
	p0, _ := svgCounts(t, b0)
	if ph <= p0 {
		t.Errorf("ours over three rounds drew %d paths, over one %d: no whiskers for ours", ph, p0)
	}
}

func TestSVGOfNothingIsAnError(t *testing.T) {
	if _, err := SVG(nil); err == nil {
		t.Error("SVG(nil) succeeded")
	}
}

func TestSVGMarksALowerBoundMedian(t *testing.T) {
	s := scale(50000, nil, []float64{120})
	s.Runs = append(s.Runs, results.Run{Proxy: results.KubeProxy, Services: 50000, Measurements: []results.Measurement{
		{Name: results.TableNotYet, Value: 900.4, Unit: "s"}, {Name: results.CPUNotYet, Value: 810, Unit: "s"}}})
	b, err := SVG([]results.Selected{s})
	if err != nil {
		t.Fatal(err)
	}
	_, texts := svgCounts(t, b)
	for _, want := range []string{"> 900", "> 810", "120"} {
		if !strings.Contains(strings.Join(texts, "|"), want) {
			t.Errorf("no text %q in the SVG's %q", want, texts)
		}
	}
}
