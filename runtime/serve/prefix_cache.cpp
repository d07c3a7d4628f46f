#include "runtime/serve/prefix_cache.hpp"

#include <algorithm>
#include <map>
#include <new>

namespace tandem::rt {

// A radix tree node: the tokens on the edge into it, its children by first token,
// and the entry (if any) whose tokens end exactly here.
struct PrefixCache::Node {
  std::vector<TokenId> edge;
  std::map<TokenId, std::unique_ptr<Node>> children;
  Entry* entry = nullptr;
  Node* parent = nullptr;
};

struct PrefixCache::Entry {
  std::vector<TokenId> tokens;
  SequenceId sequence = 0;
  std::uint64_t last_used = 0;
  Node* node = nullptr;
};

PrefixCache::PrefixCache(KvCachePool& pool, std::size_t max_entries, SequenceId first_id)
    : pool_(pool), max_entries_(max_entries), next_id_(first_id), root_(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() {
  for (const auto& e : entries_) {
    if (pool_.Contains(e->sequence)) pool_.Close(e->sequence);
  }
}

std::size_t PrefixCache::entries() const { return entries_.size(); }

namespace {

// Any entry in the subtree of `node` (the most recently used one).
template <typename NodeT, typename EntryT>
EntryT* AnyEntry(NodeT* node) {
  EntryT* best = node->entry;
  for (auto& [token, child] : node->children) {
    EntryT* e = AnyEntry<NodeT, EntryT>(child.get());
    if (e != nullptr && (best == nullptr || e->last_used > best->last_used)) best = e;
  }
  return best;
}

}  // namespace

PrefixCache::Match PrefixCache::Lookup(std::span<const TokenId> tokens, int limit) {
  Node* node = root_.get();
  std::size_t depth = 0;  // tokens matched, possibly ending inside `node`'s edge
  Node* deepest = node;
  const auto cap = static_cast<std::size_t>(std::max(0, limit));
  while (depth < tokens.size() && depth < cap) {
    const auto it = node->children.find(tokens[depth]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    std::size_t i = 0;
    while (i < child->edge.size() && depth + i < tokens.size() && depth + i < cap && child->edge[i] == tokens[depth + i]) ++i;
    depth += i;
    deepest = child;
    if (i < child->edge.size()) break;  // the match ends inside this edge
    node = child;
  }
  if (depth == 0) return {};
  Entry* entry = AnyEntry<Node, Entry>(deepest);
  if (entry == nullptr) return {};
  entry->last_used = ++clock_;
  return {entry->sequence, static_cast<int>(depth)};
}

void PrefixCache::Insert(std::span<const TokenId> tokens, SequenceId source) {
  if (max_entries_ == 0 || tokens.empty()) return;
  Node* node = root_.get();
  std::size_t depth = 0;
  while (depth < tokens.size()) {
    auto it = node->children.find(tokens[depth]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(tokens.begin() + static_cast<std::ptrdiff_t>(depth), tokens.end());
      leaf->parent = node;
      Node* raw = leaf.get();
      node->children.emplace(tokens[depth], std::move(leaf));
      node = raw;
      depth = tokens.size();
      break;
    }
    Node* child = it->second.get();
    std::size_t i = 0;
    while (i < child->edge.size() && depth + i < tokens.size() && child->edge[i] == tokens[depth + i]) ++i;
    if (i < child->edge.size()) {  // split the edge at i
      auto middle = std::make_unique<Node>();
      middle->edge.assign(child->edge.begin(), child->edge.begin() + static_cast<std::ptrdiff_t>(i));
      middle->parent = node;
      std::unique_ptr<Node> tail = std::move(it->second);
      tail->edge.erase(tail->edge.begin(), tail->edge.begin() + static_cast<std::ptrdiff_t>(i));
      tail->parent = middle.get();
      middle->children.emplace(tail->edge.front(), std::move(tail));
      Node* raw = middle.get();
      it->second = std::move(middle);
      child = raw;
    }
    depth += i;
    node = child;
  }
  if (node->entry != nullptr) {  // the same tokens again: refresh
    node->entry->last_used = ++clock_;
    return;
  }
  auto entry = std::make_unique<Entry>();
  entry->tokens.assign(tokens.begin(), tokens.end());
  entry->sequence = next_id_++;
  entry->last_used = ++clock_;
  entry->node = node;
  const int length = static_cast<int>(tokens.size());
  node->entry = entry.get();
  entries_.push_back(std::move(entry));
  Entry* added = entries_.back().get();
  // Within the KV budget, older entries make room; when even that is not enough, this
  // one is not kept (a cache, not a promise).
  for (;;) {
    try {
      pool_.Fork(source, added->sequence, length, length);
      break;
    } catch (const KvBudgetExhausted&) {
      if (!EvictOldestBut(added)) {
        Remove(added);
        return;
      }
    } catch (const std::bad_alloc&) {
      Remove(added);
      return;
    }
  }
  Evict();
}

bool PrefixCache::EvictOldest() { return EvictOldestBut(nullptr); }

bool PrefixCache::EvictOldestBut(const Entry* keep) {
  Entry* oldest = nullptr;
  for (const auto& e : entries_) {
    if (e.get() != keep && (oldest == nullptr || e->last_used < oldest->last_used)) oldest = e.get();
  }
  if (oldest == nullptr) return false;
  Remove(oldest);
  return true;
}

void PrefixCache::Evict() {
  while (entries_.size() > max_entries_) {
    auto oldest =
        std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
    Remove(oldest->get());
  }
}

void PrefixCache::Remove(Entry* entry) {
  if (pool_.Contains(entry->sequence)) pool_.Close(entry->sequence);  // an entry whose copy failed has none
  Node* node = entry->node;
  node->entry = nullptr;
  // Prune nodes that no longer lead to any entry, and merge a lone child into its parent.
  while (node != root_.get() && node->entry == nullptr && node->children.empty()) {
    Node* parent = node->parent;
    parent->children.erase(node->edge.front());
    node = parent;
  }
  if (node != root_.get() && node->entry == nullptr && node->children.size() == 1) {
    std::unique_ptr<Node> only = std::move(node->children.begin()->second);
    node->children.clear();
    node->edge.insert(node->edge.end(), only->edge.begin(), only->edge.end());
    node->entry = only->entry;
    if (node->entry != nullptr) node->entry->node = node;
    for (auto& [token, grandchild] : only->children) grandchild->parent = node;
    node->children = std::move(only->children);
  }
  entries_.erase(std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.get() == entry; }));
}

}  // namespace tandem::rt
