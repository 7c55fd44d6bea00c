#include "core/run/prompt_scores.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/model/model.h"
#include "core/run/policy_run.h"
#include "core/run/sampler.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"

namespace kvlens {
namespace {

// The full cache's attention ahead, for the hindsight oracle runs this
// Session computes: a scout full cache reads the prompt and the next
// teacher-forced tokens alone (the continuation, or what the full run's own
// sampler, fresh, will choose), and each layer sums, per KV head and prompt
// position, the attention the group's query heads give it, from the last
// prompt query to the horizon's decode query. One scout serves every oracle.
void prepareFutureAttention(const Model& model, const SessionOptions& opt, const std::vector<PolicyRun*>& oracles,
                            const std::function<void()>& checkCancel) {
    int64_t far = 0;
    for (PolicyRun* run : oracles) far = std::max(far, futureHorizon(run->config(), opt.plannedSteps));
    const ModelConfig& c = model.config();
    const int64_t P = static_cast<int64_t>(opt.prompt.size()), Hkv = c.numKvHeads, G = c.groupSize();
    PolicyRun scout(model, fullCacheConfig(), opt.budget, P, CaptureTarget{});
    scout.readPromptShared(opt.prompt, {}, nullptr, checkCancel);
    Sampler sampler(opt.sampling);
    std::vector<at::Tensor> sum(static_cast<size_t>(c.numLayers));
    auto add = [&] {
        for (size_t l = 0; l < sum.size(); ++l) {
            const at::Tensor a = scout.lastAttention()[l].narrow(-1, 0, P).to(at::kCPU, at::kFloat).view({Hkv, G, P}).sum(1);
            sum[l] = sum[l].defined() ? sum[l] + a : a;
        }
    };
    std::map<int64_t, std::vector<at::Tensor>> ahead;  // horizon -> per-layer sums over its queries
    add();
    for (int64_t s = 1; s <= far; ++s) {
        checkCancel();
        const int64_t forced = forcedToken(opt, s - 1);
        const int64_t t = forced >= 0 ? forced : sampler.next(scout.logits());
        if (t < 0 || t >= c.vocabSize)
            throw ArgumentError("continuation token id " + std::to_string(t) + " is outside the vocabulary");
        scout.readToken(t);
        add();
        for (PolicyRun* run : oracles)
            if (futureHorizon(run->config(), opt.plannedSteps) == s) ahead[s] = sum;
    }
    for (PolicyRun* run : oracles) run->setSessionScores(ahead.at(futureHorizon(run->config(), opt.plannedSteps)));
}

// KVzip's scores for the runs this Session computes (kvpress KVzipPress):
// a scout cache reads the prompt; then, chunk by chunk of `chunk` prompt
// tokens, the model reads a request to repeat it and the chunk again (the
// instruction — for a later chunk the other wording and the previous
// chunk's last 8 tokens — a newline, the chunk; no chat template), at most
// 256 rows a forward. Each layer scores the chunk's keys by every repeat
// query's softmax over [the chunk's keys | the repeat's own keys, causally],
// the maximum over the queries and the group's query heads. The repeat is
// dropped after each chunk. Without a tokenizer the repeat is the chunk alone.
// The calibration prompt's queries, every layer, for the runs whose policy
// learns from them (Q-Filters): the text read in segments of at most 2,048
// tokens (as the reference's calibration texts; within the model's
// context), each on a fresh scratch cache, keeping on the host only every
// stride-th query, as many as the runs sample at most.
void prepareCalibration(const Model& model, const SessionOptions& opt, const std::vector<PolicyRun*>& which,
                        const std::function<void()>& checkCancel) {
    if (opt.calibration.empty()) return;
    int64_t samples = 1;
    for (PolicyRun* run : which) samples = std::max(samples, run->config().getInt("samples"));
    const ModelConfig& c = model.config();
    const auto n = static_cast<int64_t>(opt.calibration.size());
    const int64_t stride = (n + samples - 1) / samples;
    const int64_t segment = std::max<int64_t>(1, std::min<int64_t>(2048, c.maxPositions > 0 ? c.maxPositions : 2048));
    constexpr int64_t kRows = 256;
    std::vector<std::vector<at::Tensor>> parts(static_cast<size_t>(c.numLayers));
    int64_t from = 0;  // the text position of the forward's first row
    ForwardOptions o;
    o.lastLogitsOnly = true;
    o.observer = [&](int64_t l, const LayerCapture& cap) {
        std::vector<int64_t> pick;  // rows at text positions that are multiples of the stride
        for (int64_t i = 0; i < cap.queries.size(1); ++i)
            if ((from + i) % stride == 0) pick.push_back(i);
        if (pick.empty()) return;
        const at::Tensor idx = at::tensor(pick, at::TensorOptions().dtype(at::kLong)).to(cap.queries.device());
        parts[static_cast<size_t>(l)].push_back(cap.queries.index_select(1, idx).to(at::kCPU, at::kFloat));
    };
    for (int64_t start = 0; start < n; start += segment) {
        KvCache cache = model.newCache();
        for (from = start; from < std::min(n, start + segment); from += kRows) {
            checkCancel();
            const int64_t end = std::min({n, start + segment, from + kRows});
            model.forward(std::vector<int64_t>(opt.calibration.begin() + from, opt.calibration.begin() + end), cache, o);
        }
    }
    std::vector<at::Tensor> queries;
    for (auto& p : parts) queries.push_back(at::cat(p, 1));
    for (PolicyRun* run : which) run->calibrate(queries);
}

void prepareReconstruction(const Model& model, const SessionOptions& opt, const std::vector<PolicyRun*>& runs,
                           const std::function<void()>& checkCancel) {
    std::map<int64_t, std::vector<PolicyRun*>> byChunk;
    for (PolicyRun* run : runs) byChunk[run->config().getInt("chunk")].push_back(run);
    const ModelConfig& c = model.config();
    const int64_t P = static_cast<int64_t>(opt.prompt.size()), Hkv = c.numKvHeads, G = c.groupSize(), D = c.headDim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    auto encode = [&](const char* text) {
        std::vector<int64_t> ids;
        if (opt.tokenizer)
            for (int32_t id : opt.tokenizer->encode(text, false)) ids.push_back(id);
        return ids;
    };
    const std::vector<int64_t> first = encode("\n\nRepeat the previous context exactly."),
                               later = encode("\n\nRepeat the part of the previous context exactly, starting with"),
                               newline = encode("\n");
    constexpr int64_t kRows = 256, kPrevious = 8;
    KvCache cache = model.newCache();
    ForwardOptions plain;
    plain.lastLogitsOnly = true;
    for (int64_t from = 0; from < P; from += kRows) {
        checkCancel();
        const std::vector<int64_t> part(opt.prompt.begin() + from, opt.prompt.begin() + std::min(P, from + kRows));
        model.forward(part, cache, plain);
    }
    for (const auto& [chunk, rs] : byChunk) {
        std::vector<at::Tensor> table(static_cast<size_t>(c.numLayers));
        for (at::Tensor& t : table) t = at::zeros({Hkv, P}, at::TensorOptions().dtype(at::kFloat));
        for (int64_t start = 0; start < P; start += chunk) {
            const int64_t end = std::min(P, start + chunk), C = end - start;
            std::vector<int64_t> repeat = start == 0 ? first : later;
            if (start > 0) repeat.insert(repeat.end(), opt.prompt.begin() + std::max<int64_t>(0, start - kPrevious),
                                         opt.prompt.begin() + start);
            repeat.insert(repeat.end(), newline.begin(), newline.end());
            repeat.insert(repeat.end(), opt.prompt.begin() + start, opt.prompt.begin() + end);
            std::vector<std::vector<at::Tensor>> repeatKeys(static_cast<size_t>(c.numLayers));
            std::vector<at::Tensor> best(static_cast<size_t>(c.numLayers));
            int64_t done = 0;  // repeat rows read before this forward
            ForwardOptions o;
            o.lastLogitsOnly = true;
            o.observer = [&](int64_t l, const LayerCapture& cap) {
                const at::Tensor q = cap.queries.to(at::kFloat);  // [Hq, n, D]
                const int64_t n = q.size(1);
                auto& keys = repeatKeys[static_cast<size_t>(l)];
                keys.push_back(cap.keys.to(at::kFloat));
                const at::Tensor own = at::cat(keys, 1);                                             // [Hkv, done+n, D]
                const at::Tensor ctx = cache.entries(l).k.narrow(1, start, C).to(at::kFloat);      // [Hkv, C, D]
                const at::Tensor qg = q.view({Hkv, G, n, D});
                const at::Tensor toCtx = at::matmul(qg, ctx.unsqueeze(1).transpose(-1, -2)) * scale;  // [Hkv, G, n, C]
                at::Tensor toOwn = at::matmul(qg, own.unsqueeze(1).transpose(-1, -2)) * scale;        // [Hkv, G, n, done+n]
                const at::Tensor row = at::arange(n, at::TensorOptions().dtype(at::kLong).device(q.device())) + done;
                const at::Tensor col = at::arange(done + n, at::TensorOptions().dtype(at::kLong).device(q.device()));
                toOwn = toOwn.masked_fill(col.unsqueeze(0) > row.unsqueeze(1), -std::numeric_limits<float>::infinity());
                const at::Tensor seen = at::softmax(at::cat({toCtx, toOwn}, -1), -1).narrow(-1, 0, C).amax({1, 2});
                at::Tensor& b = best[static_cast<size_t>(l)];
                b = b.defined() ? at::maximum(b, seen) : seen;
            };
            for (int64_t from = 0; from < static_cast<int64_t>(repeat.size()); from += kRows) {
                checkCancel();
                const std::vector<int64_t> rows(repeat.begin() + from,
                                                repeat.begin() + std::min<int64_t>(static_cast<int64_t>(repeat.size()), from + kRows));
                model.forward(rows, cache, o);
                done += static_cast<int64_t>(rows.size());
            }
            for (size_t l = 0; l < table.size(); ++l) table[l].narrow(1, start, C).copy_(best[l].to(at::kCPU));
            cache.truncate(P);
        }
        for (PolicyRun* run : rs) run->setSessionScores(table);
    }
}

}  // namespace

// The decode steps a hindsight oracle reads ahead: its horizon, or the
// steps the caller plans, or (planning none) the GUI's default 16.
int64_t futureHorizon(const PolicyConfig& config, int64_t plannedSteps) {
    constexpr int64_t kDefaultHorizon = 16;
    const int64_t h = config.getInt("horizon");
    return h > 0 ? h : plannedSteps > 0 ? plannedSteps : kDefaultHorizon;
}

int64_t forcedToken(const SessionOptions& opt, int64_t s) {
    const auto Q = static_cast<int64_t>(opt.question.size());
    if (s < Q) return opt.question[static_cast<size_t>(s)];
    s -= Q;
    return s < static_cast<int64_t>(opt.continuation.size()) ? opt.continuation[static_cast<size_t>(s)] : -1;
}

void preparePromptScores(const Model& model, const SessionOptions& opt, const std::vector<PolicyRun*>& runs,
                         const std::function<void()>& checkCancel) {
    using Preparation = PolicyInfo::Preparation;
    std::map<Preparation, std::vector<PolicyRun*>> byKind;
    for (PolicyRun* run : runs) byKind[run->config().info().preparation].push_back(run);
    if (!byKind[Preparation::FutureAttention].empty())
        prepareFutureAttention(model, opt, byKind[Preparation::FutureAttention], checkCancel);
    if (!byKind[Preparation::Reconstruction].empty())
        prepareReconstruction(model, opt, byKind[Preparation::Reconstruction], checkCancel);
    if (!byKind[Preparation::CalibrationQueries].empty())
        prepareCalibration(model, opt, byKind[Preparation::CalibrationQueries], checkCancel);
}

}  // namespace kvlens
