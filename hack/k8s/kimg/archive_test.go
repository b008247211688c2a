package main

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// archiveImage reads the image tagged tag from the docker archive at p.
func archiveImage(t *testing.T, p, tag string) v1.Image {
	t.Helper()
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(p, &ref)
	if err != nil {
		t.Fatalf("%s in %s: %v", tag, p, err)
	}
	return img
}
