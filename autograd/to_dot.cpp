// to_dot: walks the graph from a tensor's grad_fn and writes DOT.
#include "autograd/to_dot.h"

#include <sstream>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"

namespace octo::autograd {

namespace {
std::string describe(const Tensor& t) {
  std::ostringstream os;
  os << t.dtype() << ' ' << shape_str(t.sizes());
  return os.str();
}
}  // namespace

std::string to_dot(const Tensor& t) {
  std::ostringstream os;
  os << "digraph octo_graph {\n"
     << "  rankdir=TB;\n"
     << "  node [shape=box, style=rounded, fontname=\"monospace\", fontsize=10];\n";
  if (!t.defined() || !t.grad_fn()) {
    os << "  empty [label=\"no recorded graph (leaf or no grad)\"];\n}\n";
    return os.str();
  }
  std::unordered_map<const Node*, int> ids;
  std::vector<const Node*> stack{t.grad_fn().get()};
  ids[stack.back()] = 0;
  os << "  output [label=\"output\\n" << describe(t) << "\", shape=ellipse];\n";
  os << "  output -> n0;\n";
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    int id = ids[n];
    os << "  n" << id << " [label=\"" << n->name() << "  #" << n->sequence_nr() << "\\n"
       << n->device();
    if (auto* acc = dynamic_cast<const AccumulateGrad*>(n)) {
      os << "\\nleaf " << describe(acc->variable()) << "\", style=\"rounded,filled\", "
         << "fillcolor=lightblue];\n";
    } else {
      auto saved = n->saved_tensors();
      if (!saved.empty()) {
        os << "\\nsaved:";
        for (const SavedTensor* s : saved) {
          if (s->released()) {
            os << " (freed)";
          } else if (s->peek().defined()) {
            os << ' ' << describe(s->peek());
          }
        }
      }
      os << "\"];\n";
    }
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      auto [it, inserted] = ids.emplace(e.node.get(), static_cast<int>(ids.size()));
      if (inserted) stack.push_back(e.node.get());
      os << "  n" << id << " -> n" << it->second << ";\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace octo::autograd
