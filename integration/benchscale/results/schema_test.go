package results

import "testing"

func TestMedianIsTheMiddleValueOrTheMeanOfTheTwoMiddleOnes(t *testing.T) {
	for _, tc := range []struct {
		name string
		vs   []float64
		want float64
	}{
		{"none is 0", nil, 0},
		{"one is itself", []float64{7}, 7},
		{"odd count, unsorted: the middle one", []float64{9, 1, 5}, 5},
		{"even count: the mean of the two middle ones", []float64{4, 1, 10, 2}, 3},
		{"even count of two", []float64{2, 3}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.vs...)
			if got := Median(tc.vs); got != tc.want {
				t.Errorf("Median(%v) = %v, want %v", tc.vs, got, tc.want)
			}
			for i := range in {
				if in[i] != tc.vs[i] {
					t.Fatalf("Median reordered its argument: %v, was %v", tc.vs, in)
				}
			}
		})
	}
}

func TestFormatIsWholeThreeDigitsOrFewerDecimals(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{14, "14"}, {5836.83061, "5837"}, {130.301891198, "130"}, {15.33513738, "15.3"},
		{3.98457059, "3.98"}, {0.67084814, "0.671"}, {56.96765, "57.0"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := Format(tc.v); got != tc.want {
				t.Errorf("Format(%v) = %s, want %s", tc.v, got, tc.want)
			}
		})
	}
}
