package steps

import (
	"context"
	"fmt"
	"slices"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Names of upstream's config/setup/raven-proxy-dns.yaml (its Deployment,
// ConfigMap and Service are all raven-proxy-dns), and the ConfigMap install
// writes next to it.
const (
	ravenProxyDNSYurt = "raven-proxy-dns-yurt"
)

// ravenProxyDNSStep makes the raven-proxy-dns Deployment coredns-yurt in
// place: its pod template runs --coredns-image, reads ConfigMap
// raven-proxy-dns-yurt, and no longer mounts the records as a file. The
// rollout is waited for: the new pods Ready and ready endpoints of Service
// raven-proxy-dns (which kube-apiserver resolves node names at), with a
// handover pod behind the Service meanwhile. Revert restores the template
// exactly the same way.
func ravenProxyDNSStep() engine.Step {
	read := func(ctx context.Context, env *engine.Env) (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, kube.Key(tunnelnodes.RavenProxyDNSName), d); err != nil {
			return nil, fmt.Errorf("reading Deployment %s: %w", tunnelnodes.RavenProxyDNSName, err)
		}
		return d, nil
	}
	h := kube.Handover{Service: tunnelnodes.RavenProxyDNSName, Deployment: tunnelnodes.RavenProxyDNSName}
	edit := kube.FieldEdit{
		Key: fmt.Sprintf("Deployment %s/%s pod template", tunnelnodes.Namespace, tunnelnodes.RavenProxyDNSName),
		Get: func(ctx context.Context, env *engine.Env) (string, bool, error) {
			d, err := read(ctx, env)
			if err != nil {
				return "", false, err
			}
			b, err := yaml.Marshal(d.Spec.Template)
			return string(b), true, err
		},
		Set: func(ctx context.Context, env *engine.Env, value string, _ bool) error {
			var tmpl corev1.PodTemplateSpec
			if err := yaml.UnmarshalStrict([]byte(value), &tmpl); err != nil {
				return err
			}
			if err := h.Begin(ctx, env, tmpl); err != nil {
				return err
			}
			d, err := read(ctx, env)
			if err != nil {
				return err
			}
			old, err := kube.DeploymentPods(ctx, env, d)
			if err != nil {
				return err
			}
			// No pod of the Deployment carries the handover label: the
			// handover pod answers alone while the old pods drain and go.
			// The handover pod's own drain, after the rollout, is the one that
			// reports a pod that never got quiet.
			_, err = kube.HandOff(ctx, env, tunnelnodes.RavenProxyDNSName, old, map[string]string{kube.HandoverLabel: h.Deployment}, func() error {
				d.Spec.Template = tmpl
				return env.Client.Update(ctx, d)
			})
			return err
		},
		Desired: func(env *engine.Env, cur string, _ bool) (string, error) {
			var tmpl corev1.PodTemplateSpec
			if err := yaml.UnmarshalStrict([]byte(cur), &tmpl); err != nil {
				return "", err
			}
			if err := swapRavenProxyDNS(&tmpl.Spec, env.Options.CoreDNSImage); err != nil {
				return "", err
			}
			b, err := yaml.Marshal(tmpl)
			return string(b), err
		},
	}
	rolledOut := func(ctx context.Context, env *engine.Env) error {
		var podIPs []string
		return kubewait.For(ctx, env.Options.Timeout, "Deployment "+tunnelnodes.RavenProxyDNSName+" not rolled out behind its Service",
			kube.Both(kube.DeploymentRolledOut(env, tunnelnodes.RavenProxyDNSName, &podIPs), kube.ServiceEndpointsReady(env, tunnelnodes.RavenProxyDNSName, &podIPs)))
	}
	step := fieldStep("raven-proxy-dns", "Deployment "+tunnelnodes.RavenProxyDNSName+" runs coredns-yurt with ConfigMap "+ravenProxyDNSYurt+
		" (no records file mounted); rolled out behind Service "+tunnelnodes.RavenProxyDNSName+", which a handover pod answered for meanwhile", edit, rolledOut)
	// The handover ends after the rollout, and one an interrupted run left
	// goes too, whatever this run found to do.
	endingHandover := func(run func(context.Context, *engine.Env, *engine.StepState) (engine.Result, error)) func(context.Context, *engine.Env, *engine.StepState) (engine.Result, error) {
		return func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			if !env.Options.DryRun {
				if err := kube.EndHandOff(ctx, env, tunnelnodes.RavenProxyDNSName); err != nil {
					return engine.Result{}, err
				}
			}
			res, err := run(ctx, env, ss)
			if err != nil || env.Options.DryRun {
				return res, err
			}
			note, err := h.End(ctx, env)
			if note != "" {
				res.Summary += "; " + note
			}
			return res, err
		}
	}
	step.Install, step.Revert = endingHandover(step.Install), endingHandover(step.Revert)
	return step
}

// swapRavenProxyDNS edits raven-proxy-dns's pod spec into coredns-yurt: the
// container that mounts the Corefile runs image, the Corefile volume reads
// raven-proxy-dns-yurt, and the records volume (the ConfigMap mounted as a
// hosts file) and its mounts go. Applied twice it changes nothing.
func swapRavenProxyDNS(spec *corev1.PodSpec, image string) error {
	var corefileVolume string
	var records []string
	for i := range spec.Volumes {
		cm := spec.Volumes[i].ConfigMap
		switch {
		case cm == nil:
		case cm.Name == tunnelnodes.RavenProxyDNSName || cm.Name == ravenProxyDNSYurt:
			cm.Name, corefileVolume = ravenProxyDNSYurt, spec.Volumes[i].Name
		case cm.Name == tunnelnodes.RavenConfigMapName:
			records = append(records, spec.Volumes[i].Name)
		}
	}
	if corefileVolume == "" {
		return fmt.Errorf("Deployment %s mounts no ConfigMap %s: not the layout of Raven's raven-proxy-dns.yaml", tunnelnodes.RavenProxyDNSName, tunnelnodes.RavenProxyDNSName)
	}
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return slices.Contains(records, v.Name) })
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return slices.Contains(records, m.Name) })
		if image != "" && slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == corefileVolume }) {
			c.Image = image
		}
	}
	return nil
}
