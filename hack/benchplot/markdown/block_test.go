package markdown

import (
	"errors"
	"testing"
)

func TestReplaceChangesOnlyTheTextBetweenTheMarkers(t *testing.T) {
	for _, tc := range []struct {
		name, doc, content, want string
	}{
		{
			name:    "old block replaced, text before and after kept byte for byte",
			doc:     "# B\n\n    make x\n\n" + Begin + "\nold\ntable\n" + End + "\n\nprose  \nwith trailing spaces\n",
			content: "new\n",
			want:    "# B\n\n    make x\n\n" + Begin + "\nnew\n" + End + "\n\nprose  \nwith trailing spaces\n",
		},
		{
			name:    "empty block filled",
			doc:     "a\n" + Begin + "\n" + End + "\nb",
			content: "| t |\n",
			want:    "a\n" + Begin + "\n| t |\n" + End + "\nb",
		},
		{
			name:    "content without a final newline gets one, so the end marker stays on its own line",
			doc:     Begin + "\n" + End,
			content: "x",
			want:    Begin + "\nx\n" + End,
		},
		{
			name:    "a marker quoted inside a line is not a marker",
			doc:     "see `" + Begin + "`\n" + Begin + "\nold\n" + End + "\n",
			content: "new\n",
			want:    "see `" + Begin + "`\n" + Begin + "\nnew\n" + End + "\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Replace(tc.doc, tc.content)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Replace:\n%q\nwant\n%q", got, tc.want)
			}
			block, err := Block(got)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := Replace(tc.doc, tc.content); got != want {
				t.Fatal("Replace is not deterministic")
			}
			if again, _ := Replace(got, block); again != got {
				t.Errorf("Replace(doc, Block(doc)) changed doc:\n%q\nwas\n%q", again, got)
			}
		})
	}
}

func TestMarkersMustBeThereOnceAndInOrder(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"none", "# Benchmarks\n"},
		{"begin only", Begin + "\n"},
		{"end only", End + "\n"},
		{"begin twice", Begin + "\n" + Begin + "\n" + End + "\n"},
		{"end before begin", End + "\n" + Begin + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Replace(tc.doc, "x\n"); !errors.Is(err, ErrMarkers) {
				t.Errorf("Replace: %v, want ErrMarkers", err)
			}
			if _, err := Block(tc.doc); !errors.Is(err, ErrMarkers) {
				t.Errorf("Block: %v, want ErrMarkers", err)
			}
		})
	}
}
