<%@ page contentType="text/plain" trimDirectiveWhitespaces="true" %>
<%
  // Two cookies out, the cookies in echoed back, and a session (JSESSIONID carries the jvmRoute).
  Cookie a = new Cookie("flavour", "oatmeal");
  a.setPath("/");
  response.addCookie(a);
  Cookie b = new Cookie("size", "large");
  b.setPath("/");
  response.addCookie(b);
  if (request.getParameter("session") != null) session.setAttribute("seen", "yes");
  Cookie[] in = request.getCookies();
  if (in != null) for (Cookie c : in) out.println("cookie." + c.getName() + "=" + c.getValue());
  out.println("session=" + (request.getSession(false) == null ? "none" : request.getSession(false).getId()));
%>
