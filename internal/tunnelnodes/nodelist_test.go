package tunnelnodes

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

var edgeSelector = labels.SelectorFromSet(labels.Set{EdgeNodeLabel: "true"})

// encodeProtobuf is list as the apiserver sends it in protobuf.
func encodeProtobuf(t testing.TB, list *corev1.NodeList) []byte {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	enc := serializer.NewCodecFactory(scheme).EncoderForVersion(protobuf.NewSerializer(scheme, scheme), corev1.SchemeGroupVersion)
	data, err := runtime.Encode(enc, list)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// kubeletNode is worker-1's Node from the real cluster (test/testdata/kubelet).
func kubeletNode(t testing.TB) corev1.Node {
	t.Helper()
	data, err := os.ReadFile("../../test/testdata/kubelet/node.json")
	if err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := json.Unmarshal(data, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDecodeNodeList: what DecodeNodeList reads of each Node is what NodeOf
// takes of the decoded Node: a kubelet's Node and the odd cases.
func TestDecodeNodeList(t *testing.T) {
	kubelet := kubeletNode(t)
	cloud := kubelet.DeepCopy()
	cloud.Name, cloud.Labels[EdgeNodeLabel] = "cloud-1", "false"
	addr := func(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: typ, Address: a}
	}
	list := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "4711", Continue: "next-page"}, Items: []corev1.Node{
		kubelet,
		*cloud,
		{ObjectMeta: metav1.ObjectMeta{Name: "bare"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ext-then-int", Labels: map[string]string{"a": "b"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{addr(corev1.NodeExternalIP, "203.0.113.7"), addr(corev1.NodeHostName, "h"),
				addr(corev1.NodeInternalIP, "not-an-ip"), addr(corev1.NodeInternalDNS, "h.local"), addr(corev1.NodeInternalIP, "fd00::1")}}},
	}}
	got, err := DecodeNodeList(encodeProtobuf(t, list), edgeSelector)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "4711" || got.Continue != "next-page" || len(got.Items) != len(list.Items) {
		t.Fatalf("got resourceVersion %q, continue %q, %d items", got.ResourceVersion, got.Continue, len(got.Items))
	}
	for i := range list.Items {
		if want := NodeOf(&list.Items[i], edgeSelector); !got.Items[i].Equal(&want) {
			t.Errorf("node %d: %+v, want %+v", i, got.Items[i], want)
		}
	}
	if !got.Items[0].Edge || got.Items[1].Edge {
		t.Errorf("edge bits %v %v, want true false", got.Items[0].Edge, got.Items[1].Edge)
	}

	for name, body := range map[string][]byte{
		"JSON":      []byte(`{"kind":"NodeList"}`),
		"truncated": encodeProtobuf(t, list)[:100],
		"a Pod":     append([]byte("k8s\x00"), 0x0a, 0x05, 0x12, 0x03, 'P', 'o', 'd'),
	} {
		if _, err := DecodeNodeList(body, edgeSelector); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// FuzzDecodeNodeList: any body is an error or a list, never a panic; a
// NodeList the apiserver would send reads as NodeOf reads it decoded.
func FuzzDecodeNodeList(f *testing.F) {
	f.Add("worker-1", EdgeNodeLabel, "true", string(corev1.NodeInternalIP), "192.0.2.1", []byte("k8s\x00"))
	f.Add("", "", "", string(corev1.NodeExternalIP), "::1", []byte{})
	f.Fuzz(func(t *testing.T, name, key, value, addrType, address string, body []byte) {
		DecodeNodeList(body, edgeSelector) //nolint:errcheck // only that it returns
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{key: value, "x": key}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeAddressType(addrType), Address: address},
				{Type: corev1.NodeInternalIP, Address: value}}}}
		got, err := DecodeNodeList(encodeProtobuf(t, &corev1.NodeList{Items: []corev1.Node{n}}), edgeSelector)
		if err != nil {
			t.Fatal(err)
		}
		if want := NodeOf(&n, edgeSelector); len(got.Items) != 1 || !got.Items[0].Equal(&want) {
			t.Errorf("%+v, want %+v", got.Items, want)
		}
	})
}

func BenchmarkDecodeNodeList(b *testing.B) {
	n := kubeletNode(b)
	list := &corev1.NodeList{}
	for i := range 500 {
		c := n.DeepCopy()
		c.Name = fmt.Sprintf("edge-node-%06d", i)
		list.Items = append(list.Items, *c)
	}
	body := encodeProtobuf(b, list)
	// What a client-go List does instead: decode every Node whole, then take
	// what the records need.
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	b.Run("walk", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := DecodeNodeList(body, edgeSelector); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("corev1", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			obj, err := runtime.Decode(decoder, body)
			if err != nil {
				b.Fatal(err)
			}
			nodes := obj.(*corev1.NodeList)
			for i := range nodes.Items {
				NodeOf(&nodes.Items[i], edgeSelector)
			}
		}
	})
}
