#include "acme/order.h"

#include <strings.h>

#include <algorithm>

namespace peregrine::acme {
namespace {

constexpr std::string_view kJose = "application/jose+json";
constexpr std::string_view kPemChain = "application/pem-certificate-chain";

std::optional<std::chrono::seconds> retry_after_of(const Response& response, time_t now) {
  auto value = response.header("Retry-After");
  if (!value) return std::nullopt;
  return parse_retry_after(*value, now);
}

}  // namespace

std::string_view step_name(Step step) {
  switch (step) {
    case Step::kDirectory:
      return "directory";
    case Step::kNonce:
      return "newNonce";
    case Step::kAccount:
      return "newAccount";
    case Step::kNewOrder:
      return "newOrder";
    case Step::kAuthorization:
      return "authorization";
    case Step::kChallenge:
      return "challenge";
    case Step::kPollAuthorization:
      return "authorization poll";
    case Step::kPollOrder:
      return "order poll";
    case Step::kFinalize:
      return "finalize";
    case Step::kCertificate:
      return "certificate";
  }
  return "?";
}

std::optional<std::string_view> Response::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0)
      return std::string_view(value);
  return std::nullopt;
}

OrderMachine::OrderMachine(OrderOptions options, const AccountKey& account_key,
                           EVP_PKEY* certificate_key)
    : options_(std::move(options)), account_key_(account_key), certificate_key_(certificate_key) {}

Action OrderMachine::start() {
  if (options_.names.empty()) return fail(Step::kDirectory, "the order names no host");
  if (options_.eab_kid.empty() != options_.eab_hmac_key.empty())
    return fail(Step::kDirectory, "External Account Binding needs both its key id and MAC key");
  return send(Pending{Step::kDirectory, options_.directory_url, {}, false});
}

Action OrderMachine::fail(Step step, std::string what) {
  finished_ = true;
  Action action;
  action.kind = Action::Kind::kFailed;
  action.step = step;
  action.error = std::string(step_name(step)) + ": " + what;
  return action;
}

Action OrderMachine::fail_problem(Step step, const Response& response, time_t now) {
  std::optional<Problem> problem = parse_problem(response.body);
  Action action = fail(
      step,
      problem ? problem->describe() +
                    (problem->status == 0 ? " (HTTP " + std::to_string(response.status) + ")" : "")
              : "HTTP " + std::to_string(response.status) + " without a problem document");
  action.problem = std::move(problem);
  action.retry_after = retry_after_of(response, now);
  return action;
}

Action OrderMachine::send(Pending pending) {
  pending_ = std::move(pending);
  Action action;
  action.kind = Action::Kind::kSend;
  if (pending_.step == Step::kDirectory) {
    action.step = Step::kDirectory;
    action.request = Request{"GET", pending_.url, {}, {}, "application/json"};
    return action;
  }
  if (nonce_.empty()) {
    // No nonce yet (or the last one was used): ask for one, then send what waits.
    action.step = Step::kNonce;
    action.request = Request{"HEAD", directory_->new_nonce, {}, {}, {}};
    awaiting_nonce_ = true;
    return action;
  }
  action.step = pending_.step;
  std::string kid = pending_.use_jwk ? std::string() : account_url_;
  action.request.method = "POST";
  action.request.url = pending_.url;
  action.request.body = sign_request(account_key_, kid, nonce_, pending_.url, pending_.payload);
  action.request.content_type = kJose;
  action.request.accept = pending_.step == Step::kCertificate ? kPemChain : std::string_view();
  nonce_.clear();  // a nonce is good for one request
  return action;
}

Action OrderMachine::post(Step step, std::string url, std::string payload, bool use_jwk) {
  nonce_retries_ = 0;
  return send(Pending{step, std::move(url), std::move(payload), use_jwk});
}

Action OrderMachine::poll(Step step, std::string url, const Response* response, time_t now) {
  if (++polls_ > options_.max_polls)
    return fail(step, "still not done after " + std::to_string(options_.max_polls) + " polls");
  nonce_retries_ = 0;
  pending_ = Pending{step, std::move(url), {}, false};
  Action action;
  action.kind = Action::Kind::kWait;
  action.step = step;
  waiting_ = true;
  if (pending_.url != poll_url_) {
    poll_url_ = pending_.url;
    poll_streak_ = 0;
  }
  std::optional<std::chrono::seconds> after =
      response ? retry_after_of(*response, now) : std::nullopt;
  if (after) {
    action.wait = std::min(*after, options_.max_poll);
  } else {
    std::chrono::milliseconds wait = options_.first_poll * (1 << std::min(poll_streak_, 10));
    action.wait = std::min(wait, options_.default_poll);
  }
  ++poll_streak_;
  return action;
}

Action OrderMachine::on_wait_over() {
  if (finished_) return fail(pending_.step, "the order has already ended");
  if (!waiting_) return fail(pending_.step, "the order is not waiting");
  waiting_ = false;
  return send(pending_);
}

Action OrderMachine::on_provisioned() {
  if (finished_) return fail(Step::kChallenge, "the order has already ended");
  if (!provisioning_) return fail(Step::kChallenge, "no challenge is being answered");
  provisioning_ = false;
  return post(Step::kChallenge, challenge_url_, challenge_response_payload());
}

Action OrderMachine::on_response(const Response& response, time_t now) {
  if (finished_) return fail(pending_.step, "a response came after the order ended");
  if (waiting_ || provisioning_)
    return fail(pending_.step, "a response came while none was asked for");
  // RFC 8555 §6.5.1: a nonce is base64url; anything else is not sent back (a hostile value
  // would otherwise travel in every signed header).
  if (auto nonce = response.header("Replay-Nonce");
      nonce && !nonce->empty() && nonce->size() <= 256 &&
      nonce->find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
          std::string_view::npos)
    nonce_ = *nonce;

  Step step = pending_.step;
  if (awaiting_nonce_) {
    awaiting_nonce_ = false;
    if (nonce_.empty())
      return fail(Step::kNonce,
                  "the CA sent no Replay-Nonce (HTTP " + std::to_string(response.status) + ")");
    return send(pending_);
  }

  if (response.status < 200 || response.status >= 300) {
    std::optional<Problem> problem = parse_problem(response.body);
    if (problem && problem->is("badNonce") && step != Step::kDirectory &&
        nonce_retries_ < options_.max_nonce_retries) {
      ++nonce_retries_;
      return send(pending_);
    }
    return fail_problem(step, response, now);
  }
  std::string error;
  switch (step) {
    case Step::kDirectory: {
      directory_ = parse_directory(response.body, &error);
      if (!directory_) return fail(step, error);
      if (directory_->external_account_required && options_.eab_kid.empty())
        return fail(step, "the CA requires External Account Binding (give its key id and MAC key)");
      std::string eab;
      if (!options_.eab_kid.empty()) {
        auto binding = external_account_binding(
            account_key_, options_.eab_kid, options_.eab_hmac_key, directory_->new_account, &error);
        if (!binding) return fail(Step::kAccount, error);
        eab = std::move(*binding);
      }
      return post(Step::kAccount, directory_->new_account,
                  new_account_payload(options_.contacts, options_.terms_agreed, eab), true);
    }
    case Step::kAccount: {
      auto location = response.header("Location");
      if (!location || location->empty())
        return fail(step, "the CA sent no account URL (Location)");
      account_url_ = *location;
      auto account = parse_account(response.body, &error);
      if (account && account->status != Status::kValid && account->status != Status::kUnknown)
        return fail(step, "the account is " + std::string(status_name(account->status)));
      return post(Step::kNewOrder, directory_->new_order, new_order_payload(options_.names));
    }
    case Step::kNewOrder: {
      auto location = response.header("Location");
      if (!location || location->empty()) return fail(step, "the CA sent no order URL (Location)");
      order_url_ = *location;
      auto order = parse_order(response.body, &error);
      if (!order) return fail(step, error);
      if (order->authorizations.empty() && order->status == Status::kPending)
        return fail(step, "a pending order without authorizations");
      authorizations_ = order->authorizations;
      finalize_url_ = order->finalize;
      authz_index_ = 0;
      if (order->status == Status::kPending) return next_authorization();
      return on_order(*order, response, now);
    }
    case Step::kAuthorization:
    case Step::kPollAuthorization: {
      auto authz = parse_authorization(response.body, &error);
      if (!authz) return fail(step, error);
      return on_authorization(*authz, response, now);
    }
    case Step::kChallenge: {
      auto challenge = parse_challenge(response.body, &error);
      if (!challenge) return fail(step, error);
      if (challenge->status == Status::kInvalid)
        return fail(step, provision_.challenge_type + " for " + provision_.identifier +
                              " is invalid" +
                              (challenge->error ? ": " + challenge->error->describe() : ""));
      if (challenge->status == Status::kValid) {
        ++authz_index_;
        return next_authorization();
      }
      return poll(Step::kPollAuthorization, authorizations_[authz_index_], &response, now);
    }
    case Step::kPollOrder:
    case Step::kFinalize: {
      auto order = parse_order(response.body, &error);
      if (!order) return fail(step, error);
      return on_order(*order, response, now);
    }
    case Step::kCertificate: {
      auto chain = parse_pem_chain(response.body, &error);
      if (!chain) return fail(step, error);
      finished_ = true;
      Action action;
      action.kind = Action::Kind::kDone;
      action.step = step;
      action.chain_pem = response.body;
      return action;
    }
    case Step::kNonce:
      break;
  }
  return fail(step, "unexpected response");
}

Action OrderMachine::next_authorization() {
  if (authz_index_ >= authorizations_.size()) return poll(Step::kPollOrder, order_url_, nullptr, 0);
  return post(Step::kAuthorization, authorizations_[authz_index_], {});
}

Action OrderMachine::on_authorization(const Authorization& authz, const Response& response,
                                      time_t now) {
  Step step = pending_.step;
  const std::string& name = authz.identifier.value;
  switch (authz.status) {
    case Status::kValid:
      ++authz_index_;
      return next_authorization();
    case Status::kPending:
      break;
    default: {
      // The failed challenge's error says why (RFC 8555 §7.1.4); name it.
      std::string why;
      for (const Challenge& ch : authz.challenges)
        if (ch.error) why = ": " + ch.type + ": " + ch.error->describe();
      return fail(step, "the authorization for " + name + " is " +
                            std::string(status_name(authz.status)) + why);
    }
  }
  if (step == Step::kPollAuthorization)
    return poll(Step::kPollAuthorization, authorizations_[authz_index_], &response, now);

  for (const std::string& type : options_.challenge_types) {
    for (const Challenge& ch : authz.challenges) {
      if (ch.type != type) continue;
      // RFC 8737 §3: TLS-ALPN-01 can't prove a wildcard; RFC 8555 §8.3: nor can HTTP-01.
      if (authz.wildcard) continue;
      challenge_url_ = ch.url;
      provision_ = Provision{ch.type, name, ch.token, key_authorization(ch.token, account_key_)};
      if (ch.status == Status::kProcessing || ch.status == Status::kValid)
        return poll(Step::kPollAuthorization, authorizations_[authz_index_], &response, now);
      provisioning_ = true;
      Action action;
      action.kind = Action::Kind::kProvision;
      action.step = Step::kChallenge;
      action.provision = provision_;
      return action;
    }
  }
  std::string offered;
  for (const Challenge& ch : authz.challenges) offered += (offered.empty() ? "" : ", ") + ch.type;
  return fail(step, "the CA offers " + (offered.empty() ? std::string("no challenge") : offered) +
                        " for " + (authz.wildcard ? "*." : "") + name +
                        ", none of which this client answers");
}

Action OrderMachine::on_order(const Order& order, const Response& response, time_t now) {
  Step step = pending_.step;
  if (!order.finalize.empty()) finalize_url_ = order.finalize;
  switch (order.status) {
    case Status::kReady:
      if (finalized_) return poll(Step::kPollOrder, order_url_, &response, now);
      return finalize(finalize_url_);
    case Status::kValid:
      if (order.certificate.empty()) return fail(step, "a valid order without a certificate URL");
      return post(Step::kCertificate, order.certificate, {});
    case Status::kPending:
    case Status::kProcessing:
      return poll(Step::kPollOrder, order_url_, &response, now);
    default:
      return fail(step, "the order is " + std::string(status_name(order.status)) +
                            (order.error ? ": " + order.error->describe() : ""));
  }
}

Action OrderMachine::finalize(const std::string& url) {
  std::string error;
  auto csr = make_csr_der(options_.names, certificate_key_, &error);
  if (!csr) return fail(Step::kFinalize, error);
  finalized_ = true;
  return post(Step::kFinalize, url, finalize_payload(*csr));
}

}  // namespace peregrine::acme
