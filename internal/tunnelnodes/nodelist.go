package tunnelnodes

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NodeList is a page of Nodes as the records need them.
type NodeList struct {
	ResourceVersion, Continue string
	Items                     []Node
}

// DecodeNodeList reads a NodeList the apiserver sent in protobuf
// (application/vnd.kubernetes.protobuf) into what the records need of each
// Node, edge nodes selected by edge. A kubelet's Node is mostly images,
// conditions and managedFields: this walks past them instead of decoding
// them (a whole corev1.Node decode costs 100,000 kubelet-sized Nodes about
// 17 s of CPU). The field numbers are k8s.io/api's generated.proto.
func DecodeNodeList(data []byte, edge labels.Selector) (NodeList, error) {
	var list NodeList
	raw, err := unwrapUnknown(data)
	if err != nil {
		return list, err
	}
	err = eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // metadata: ListMeta
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 2:
					list.ResourceVersion = string(v)
				case 3:
					list.Continue = string(v)
				}
				return nil
			})
		case 2: // items
			n, err := decodeNode(v, edge)
			list.Items = append(list.Items, n)
			return err
		}
		return nil
	})
	if err != nil {
		return NodeList{}, fmt.Errorf("decoding NodeList: %w", err)
	}
	return list, nil
}

// protobufMagic starts every Kubernetes protobuf body; a runtime.Unknown
// follows, whose raw field holds the object.
var protobufMagic = []byte("k8s\x00")

func unwrapUnknown(data []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(data, protobufMagic)
	if !ok {
		return nil, errors.New("not a Kubernetes protobuf body")
	}
	var kind, encoding string
	var raw []byte
	err := eachField(rest, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // typeMeta
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 2 {
					kind = string(v)
				}
				return nil
			})
		case 2:
			raw = v
		case 3:
			encoding = string(v)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("decoding protobuf envelope: %w", err)
	case kind != "NodeList":
		return nil, fmt.Errorf("the body is a %q, not a NodeList", truncate(kind))
	case encoding != "":
		return nil, fmt.Errorf("NodeList in content encoding %q", truncate(encoding))
	}
	return raw, nil
}

func decodeNode(data []byte, edge labels.Selector) (Node, error) {
	var n Node
	var meta []byte
	err := eachField(data, func(num protowire.Number, v []byte) error {
		switch num {
		case 1: // metadata: ObjectMeta
			meta = v
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num == 1 {
					n.Name = string(v)
				}
				return nil
			})
		case 3: // status: NodeStatus
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num != 5 { // addresses
					return nil
				}
				var a corev1.NodeAddress
				err := eachField(v, func(num protowire.Number, v []byte) error {
					switch num {
					case 1:
						a.Type = corev1.NodeAddressType(v)
					case 2:
						a.Address = string(v)
					}
					return nil
				})
				if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
					n.Addresses = append(n.Addresses, a)
				}
				return err
			})
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	l := rawLabels{meta: meta}
	n.Edge = edge.Matches(&l)
	return n, l.err
}

// rawLabels are an ObjectMeta's labels (field 11, map entries of key 1 and
// value 2) read in place, for a selector's few lookups.
type rawLabels struct {
	meta []byte
	err  error
}

// Lookup implements labels.Labels.
func (l *rawLabels) Lookup(key string) (value string, found bool) {
	err := eachField(l.meta, func(num protowire.Number, v []byte) error {
		if num != 11 {
			return nil
		}
		var k, val []byte
		err := eachField(v, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				k = v
			case 2:
				val = v
			}
			return nil
		})
		if err == nil && string(k) == key { // the last one wins, as in a decoded map
			value, found = string(val), true
		}
		return err
	})
	if err != nil && l.err == nil {
		l.err = err
	}
	return value, found
}

// Has implements labels.Labels.
func (l *rawLabels) Has(key string) bool {
	_, found := l.Lookup(key)
	return found
}

// Get implements labels.Labels.
func (l *rawLabels) Get(key string) string {
	value, _ := l.Lookup(key)
	return value
}

// eachField calls f with each length-delimited field of the message data
// (strings, bytes, messages, map entries; the records need no other kind),
// and checks that every other field is well formed.
func eachField(data []byte, f func(num protowire.Number, v []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		data = data[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, data); n < 0 {
				return protowire.ParseError(n)
			}
			data = data[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if err := f(num, v); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}
