#pragma once
// A token's state in one layer × KV head of one policy's cache: what a plan
// decides for each entry (Score, Sink, Window or Evicted) and what a Trace
// shows for each position (those, plus Unseen and Held). Torch-free.
#include <cstdint>

namespace kvlens {

enum class TokenStatus : uint8_t {
    Unseen = 0,   // not read yet at this step
    Held = 1,     // in the cache, no eviction decision has touched it yet
    Score = 2,    // kept because its score ranked within the budget
    Sink = 3,     // kept as an attention sink
    Window = 4,   // kept as one of the most recent tokens
    Evicted = 5,  // removed from the cache (never comes back)
};
const char* tokenStatusName(TokenStatus s);
inline bool isHeld(TokenStatus s) {
    return s == TokenStatus::Held || s == TokenStatus::Score || s == TokenStatus::Sink || s == TokenStatus::Window;
}

}  // namespace kvlens
