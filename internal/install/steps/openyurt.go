package steps

import (
	"context"
	"fmt"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// yurtManager is OpenYurt's controller Deployment (charts/yurt-manager).
const yurtManager = "yurt-manager"

// openYurtVersion is the OpenYurt version the cluster runs, as yurt-manager's
// Deployment says it: its app.kubernetes.io/version label (the chart sets
// the release there), else its container's image tag. from says where it
// was read. nil when there is no yurt-manager or neither parses.
func openYurtVersion(ctx context.Context, env *engine.Env) (v *utilversion.Version, from string, err error) {
	d := &appsv1.Deployment{}
	switch err := env.Client.Get(ctx, kube.Key(yurtManager), d); {
	case apierrors.IsNotFound(err):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("reading Deployment %s for OpenYurt's version: %w", yurtManager, err)
	}
	if v, err := utilversion.ParseGeneric(d.Labels["app.kubernetes.io/version"]); err == nil {
		return v, "the label app.kubernetes.io/version of Deployment kube-system/" + yurtManager, nil
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if v, err := utilversion.ParseGeneric(imageTag(c.Image)); err == nil {
			return v, "image " + c.Image, nil
		}
	}
	return nil, "", nil
}

// imageTag is the tag of an image reference ("" without one): after the
// last ':' of its last path element, before a digest.
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	name := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return ""
}

// keepNodeLifecycle says whether the control-plane step leaves
// kube-controller-manager alone, and why: since OpenYurt v1.6 yurt-manager
// keeps the pods of autonomous nodes served (the autonomy-duration
// annotation, its EndpointSlice webhooks), so the node lifecycle controller
// may run; an older or unknown OpenYurt gets -nodelifecycle as before.
func keepNodeLifecycle(ctx context.Context, env *engine.Env) (keep bool, why string, err error) {
	switch env.Options.NodeLifecycle {
	case engine.NodeLifecycleKeep:
		return true, "--kcm-nodelifecycle " + engine.NodeLifecycleKeep, nil
	case engine.NodeLifecycleDisable:
		return false, "", nil
	}
	v, from, err := openYurtVersion(ctx, env)
	if err != nil || v == nil || v.LessThan(utilversion.MajorMinor(1, 6)) {
		return false, "", err
	}
	return true, fmt.Sprintf("OpenYurt v%s (%s) keeps the pods of autonomous nodes itself since v1.6", v, from), nil
}

// leftAlone is the control-plane step's words for a kube-controller-manager
// it does not touch, and why.
func leftAlone(why string) string { return "kube-controller-manager left as it is: " + why }
